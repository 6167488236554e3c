#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import Foundation
import FarcastSupport
import Synchronization

/// mpv, driven over its JSON IPC socket: started paused on the media so nothing is missed, its
/// position, pause, volume and seeks observed, commands sent as JSON lines. One player plays one
/// URL; a queue makes one per item. mpv keeps the user's own configuration (key bindings,
/// hardware decoding); `options` (`KEY=VALUE`, as `--KEY=VALUE`) add to it.
public final class MPVPlayer: MediaPlayer {
    public let program: String
    public let options: [String]
    public let events: AsyncStream<PlayerEvent>
    private let sink: AsyncStream<PlayerEvent>.Continuation
    private let state = Mutex(State())

    private struct State {
        var child: ChildProcess?
        var socket: Int32 = -1
        var folder: String?
        var position: Double = 0
        var paused = true
        var started = false
        var seeking = false
        var ended = false
        var stopRequested = false
        var volume: Int?
        var tracks = PlayingTracks()
        var muted = false
        /// `play` waiting for the first playback-restart (or the reason it failed).
        var opening: CheckedContinuation<Result<Double, PlayerError>, Never>?
    }

    /// `program`: the mpv to run (a name looked up in PATH, or a path).
    public init(program: String = "mpv", options: [String] = []) {
        self.program = program
        self.options = options
        (events, sink) = AsyncStream.makeStream(of: PlayerEvent.self, bufferingPolicy: .unbounded)
    }

    deinit {
        let (socket, folder) = state.withLock { ($0.socket, $0.folder) }
        if socket >= 0 { close(socket) }
        if let folder { Self.removeFolder(folder) }
    }

    /// mpv's path, or nil when it is not installed.
    public static func locate(_ program: String = "mpv") -> String? {
        if program.contains("/") { return FileManager.default.isExecutableFile(atPath: program) ? program : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return (path.split(separator: ":") + ["/usr/bin", "/usr/local/bin"]).map { "\($0)/\(program)" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The decoders this mpv really has (`--vd=help`, `--ad=help`): what its device profile says.
    /// With `cacheDirectory`, the lists are kept in `mpv-decoders.json` there and read again only
    /// when the mpv binary changes (its path, size or modification time): asking mpv costs two
    /// starts of it, some 90 ms each.
    public func decoders(cacheDirectory: String? = nil) async throws(PlayerError) -> LocalDecoders {
        guard let path = Self.locate(program) else {
            throw .notInstalled(program: program, install: "on Debian or Ubuntu: sudo apt install mpv")
        }
        var info = stat()
        let key = stat(path, &info) == 0 ? "\(path) \(info.st_size) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)" : path
        let cacheFile = cacheDirectory.map { $0 + "/mpv-decoders.json" }
        if let cacheFile, let data = FileManager.default.contents(atPath: cacheFile),
           let cached = try? JSONDecoder().decode(CachedDecoders.self, from: data), cached.key == key {
            return LocalDecoders(video: Set(cached.video), audio: Set(cached.audio))
        }
        async let video = Self.listing(path, "--vd=help")
        async let audio = Self.listing(path, "--ad=help")
        let decoders = LocalDecoders(video: LocalDecoders.codecs(inMPVListing: try await video.get()),
                                     audio: LocalDecoders.codecs(inMPVListing: try await audio.get()))
        if let cacheDirectory, let cacheFile,
           let data = try? JSONEncoder().encode(CachedDecoders(key: key, video: decoders.video.sorted(), audio: decoders.audio.sorted())) {
            try? FileManager.default.createDirectory(atPath: cacheDirectory, withIntermediateDirectories: true)
            try? data.write(to: URL(fileURLWithPath: cacheFile), options: .atomic)
        }
        return decoders
    }

    private struct CachedDecoders: Codable {
        var key: String
        var video: [String]
        var audio: [String]
    }

    /// What `mpv FLAG` prints on stdout (a Result: two run at once through `async let`, which
    /// keeps no typed error).
    private static func listing(_ path: String, _ flag: String) async -> Result<String, PlayerError> {
        do throws(PlayerError) { return .success(try await listingText(path, flag)) } catch { return .failure(error) }
    }

    private static func listingText(_ path: String, _ flag: String) async throws(PlayerError) -> String {
        guard let pipe = ChildProcess.makePipe() else { throw .cannotPlay("cannot make a pipe: \(String(cString: strerror(errno)))") }
        let child: ChildProcess
        do { child = try await ChildProcess.spawn([path, "--no-config", flag], stdout: pipe.write, ownGroup: true) } catch {
            close(pipe.read)
            close(pipe.write)
            throw .cannotPlay(error.description)
        }
        close(pipe.write)
        let output = await Task.detached { () -> [UInt8] in
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while bytes.count < 4 << 20 {
                let count = cRead(pipe.read, &buffer, buffer.count)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                bytes += buffer[0..<count]
            }
            close(pipe.read)
            return bytes
        }.value
        let status = await child.waitForExit()
        guard status == 0 else { throw .cannotPlay("\(path) \(flag) exited with status \(status): \(child.stderr.suffix(300))") }
        return String(decoding: output, as: UTF8.self)
    }

    public func play(_ url: URL, startSeconds: Double, tracks: PlayerTracks = PlayerTracks()) async throws(PlayerError) {
        guard let path = Self.locate(program) else {
            throw .notInstalled(program: program, install: "on Debian or Ubuntu: sudo apt install mpv")
        }
        var template = Array((NSTemporaryDirectory() + "/farcast-mpv-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw .cannotPlay("cannot make a private folder for mpv's socket: \(String(cString: strerror(errno)))") }
        let folder = String(cString: made)
        let socketPath = folder + "/ipc"
        state.withLock { $0.folder = folder; $0.position = startSeconds }
        let arguments = [path, "--idle=no", "--pause", "--input-ipc-server=\(socketPath)", "--no-input-terminal", "--msg-level=all=error",
                         String(format: "--start=%.3f", max(0, startSeconds))]
            + Self.arguments(for: tracks) + options.map { "--" + $0 } + ["--", url.isFileURL ? url.path : url.absoluteString]
        let child: ChildProcess
        do { child = try await ChildProcess.spawn(arguments, ownGroup: true) } catch { throw .cannotPlay(error.description) }
        state.withLock { $0.child = child }
        let fd = try await connect(socketPath, child: child)
        state.withLock { $0.socket = fd }
        let reader = Thread { [weak self] in self?.read(fd) }
        reader.name = "farcast mpv events"
        reader.start()
        send(["observe_property", 1, "time-pos"])
        send(["observe_property", 2, "pause"])
        send(["observe_property", 3, "volume"])
        send(["observe_property", 4, "mute"])
        send(["observe_property", 5, "current-tracks/audio"])
        send(["observe_property", 6, "current-tracks/sub"])
        // The file opens paused; the first playback-restart says it is ready at the start point.
        let opened = await withCheckedContinuation { continuation in
            let early: Result<Double, PlayerError>? = state.withLock { s in
                if s.started { return .success(s.position) }
                if s.ended { return .failure(.cannotPlay("mpv ended before playing")) }
                s.opening = continuation
                return nil
            }
            if let early { continuation.resume(returning: early) }
        }
        let position = try opened.get()
        for file in tracks.subtitleFiles {
            send(["sub-add", file.url.isFileURL ? file.url.path : file.url.absoluteString, file.selected ? "select" : "auto",
                  file.title ?? file.language ?? file.url.lastPathComponent, file.language ?? ""])
        }
        // Paused was ours, not the user's: its change to false is no event.
        state.withLock { $0.paused = false }
        send(["set_property", "pause", false])
        sink.yield(.started(position: position))
        sink.yield(.tracks(state.withLock { $0.tracks }))
        // The volume as it starts (its change events count from here).
        if let (volume, muted) = state.withLock({ s in s.volume.map { ($0, s.muted) } }) { sink.yield(.volume(volume, muted: muted)) }
    }

    /// mpv's options for `tracks`: `--aid`, `--sid` (`no` for none). Subtitle files are added
    /// over IPC once the media is open (`sub-add`, with their language and title).
    static func arguments(for tracks: PlayerTracks) -> [String] {
        var arguments: [String] = []
        if let audio = tracks.audio { arguments.append("--aid=\(audio)") }
        if let subtitle = tracks.subtitle { arguments.append(subtitle == 0 ? "--sid=no" : "--sid=\(subtitle)") }
        return arguments
    }

    /// A track as mpv describes it (`current-tracks/…`: an object, or nothing).
    static func track(_ data: Any?) -> PlayingTracks.Track? {
        guard let object = data as? [String: Any], let id = (object["id"] as? NSNumber)?.intValue else { return nil }
        return PlayingTracks.Track(id: id, language: object["lang"] as? String, title: object["title"] as? String,
                                   codec: object["codec"] as? String, isExternal: object["external"] as? Bool ?? false)
    }

    public func setPaused(_ paused: Bool) async { send(["set_property", "pause", paused]) }
    public func seek(to seconds: Double) async { send(["seek", max(0, seconds), "absolute"]) }
    public func setVolume(_ percent: Int) async { send(["set_property", "volume", min(100, max(0, percent))]) }
    public func setMuted(_ muted: Bool) async { send(["set_property", "mute", muted]) }
    public var position: Double { state.withLock { $0.position } }
    public var isPaused: Bool { state.withLock { $0.paused } }

    public func stop() async {
        let child = state.withLock { s -> ChildProcess? in
            s.stopRequested = true
            return s.child
        }
        send(["quit"])
        guard let child else { return }
        let exited = await withTaskGroup(of: Bool.self) { group in
            group.addTask { _ = await child.waitForExit(); return true }
            group.addTask { try? await Task.sleep(for: .seconds(3)); return false }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !exited { await child.terminate() }
    }

    // MARK: - IPC

    /// Connects to mpv's socket once mpv has made it (it is made before the file opens).
    private func connect(_ path: String, child: ChildProcess) async throws(PlayerError) -> Int32 {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let status = child.exitStatus {
                let said = child.stderr.trimmingCharacters(in: .whitespacesAndNewlines)
                throw .cannotPlay("mpv exited with status \(status)" + (said.isEmpty ? "" : ": " + said.split(separator: "\n").suffix(3).joined(separator: "; ")))
            }
            if FileManager.default.fileExists(atPath: path) {
                #if os(Linux)
                let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
                #else
                let fd = socket(AF_UNIX, SOCK_STREAM, 0)
                #endif
                if fd >= 0 {
                    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                    var address = sockaddr_un()
                    address.sun_family = sa_family_t(AF_UNIX)
                    let bytes = Array(path.utf8)
                    withUnsafeMutableBytes(of: &address.sun_path) { raw in
                        for (i, byte) in bytes.prefix(raw.count - 1).enumerated() { raw[i] = byte }
                    }
                    let connected = withUnsafePointer(to: &address) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { cConnect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                    }
                    if connected == 0 { return fd }
                    close(fd)
                }
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        await child.terminate()
        throw .noAnswer("mpv made no IPC socket within 10 s")
    }

    /// Sends one command (a JSON array) as a line.
    private func send(_ command: [Any]) {
        guard let data = try? JSONSerialization.data(withJSONObject: ["command": command]) else { return }
        let line = Array(data) + [0x0A]
        state.withLock { s in
            guard s.socket >= 0 else { return }
            var offset = 0
            while offset < line.count {
                let written = line[offset...].withUnsafeBytes { cWrite(s.socket, $0.baseAddress, $0.count) }
                if written <= 0 { if errno == EINTR { continue } else { return } }
                offset += written
            }
        }
    }

    /// The reader thread: mpv's lines until the socket closes (mpv quit).
    private func read(_ fd: Int32) {
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = cRead(fd, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            pending += buffer[0..<count]
            while let newline = pending.firstIndex(of: 0x0A) {
                let line = Array(pending[..<newline])
                pending.removeSubrange(...newline)
                handle(line)
            }
            // A line longer than 1 MiB is not mpv's; drop it rather than grow without bound.
            if pending.count > 1 << 20 { pending.removeAll() }
        }
        finish(.failed("mpv closed its socket"))
    }

    private func handle(_ line: [UInt8]) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any], let event = object["event"] as? String else { return }
        switch event {
        case "property-change":
            let name = object["name"] as? String
            var emit: PlayerEvent?
            state.withLock { s in
                switch name {
                case "time-pos":
                    guard let value = object["data"] as? Double else { return }
                    s.position = value
                    if s.started && !s.seeking { emit = .position(value) }
                case "pause":
                    guard let value = object["data"] as? Bool, value != s.paused else { return }
                    s.paused = value
                    if s.started { emit = .paused(value, position: s.position) }
                case "volume":
                    guard let value = object["data"] as? Double else { return }
                    s.volume = Int(value.rounded())
                    if s.started { emit = .volume(Int(value.rounded()), muted: s.muted) }
                case "mute":
                    guard let value = object["data"] as? Bool else { return }
                    s.muted = value
                    if s.started, let volume = s.volume { emit = .volume(volume, muted: value) }
                case "current-tracks/audio", "current-tracks/sub":
                    // The tracks are let go as the file unloads: that is no choice of the user's.
                    guard !s.ended, !s.stopRequested else { return }
                    let track = Self.track(object["data"])
                    var tracks = s.tracks
                    if name == "current-tracks/audio" { tracks.audio = track } else { tracks.subtitle = track }
                    guard tracks != s.tracks else { return }
                    s.tracks = tracks
                    if s.started { emit = .tracks(tracks) }
                default: return
                }
            }
            if let emit { sink.yield(emit) }
        case "seek":
            state.withLock { $0.seeking = true }
        case "playback-restart":
            let (opening, seeked) = state.withLock { s -> (CheckedContinuation<Result<Double, PlayerError>, Never>?, Double?) in
                if !s.started {
                    // The start position is reached by a seek of mpv's own: that is no user's seek.
                    s.started = true
                    s.seeking = false
                    defer { s.opening = nil }
                    return (s.opening, nil)
                }
                guard s.seeking else { return (nil, nil) }
                s.seeking = false
                return (nil, s.position)
            }
            opening?.resume(returning: .success(state.withLock { $0.position }))
            if let seeked { sink.yield(.seeked(position: seeked)) }
        case "end-file":
            switch object["reason"] as? String {
            case "eof": finish(.finished)
            case "stop", "quit", "redirect": finish(.stopped)
            default: finish(.failed((object["file_error"] as? String).map { "mpv: \($0)" } ?? "mpv could not play the media"))
            }
        default:
            break
        }
    }

    /// The end, once: a failure while opening goes to `play`, after that to the events.
    private func finish(_ reason: EndReason) {
        let (opening, position, first) = state.withLock { s -> (CheckedContinuation<Result<Double, PlayerError>, Never>?, Double, Bool) in
            let first = !s.ended
            s.ended = true
            defer { s.opening = nil }
            return (s.opening, s.position, first)
        }
        guard first else { return }
        var reason = reason
        if case .failed = reason, state.withLock({ $0.stopRequested }) { reason = .stopped }
        if let opening {
            if case .failed(let why) = reason { opening.resume(returning: .failure(.cannotPlay(why))) } else {
                opening.resume(returning: .failure(.cannotPlay("mpv ended before playing")))
            }
            sink.yield(.ended(reason, position: position))
            sink.finish()
            return
        }
        sink.yield(.ended(reason, position: position))
        sink.finish()
    }

    private static func removeFolder(_ folder: String) {
        unlink(folder + "/ipc")
        rmdir(folder)
    }
}

// The C functions by names that the methods above do not shadow.
#if canImport(Glibc)
private let cConnect = Glibc.connect
private let cWrite = Glibc.write
private let cRead = Glibc.read
#elseif canImport(Darwin)
private let cConnect = Darwin.connect
private let cWrite = Darwin.write
private let cRead = Darwin.read
#endif
