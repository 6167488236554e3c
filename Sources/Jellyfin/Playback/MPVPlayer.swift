#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import Foundation
import FarcastSupport
import Synchronization

/// mpv, driven over its JSON IPC socket: started paused on the media so nothing is missed, its
/// position, pause, volume and seeks observed, commands sent as JSON lines. mpv keeps the user's
/// own configuration (key bindings, hardware decoding); `options` (`KEY=VALUE`, as `--KEY=VALUE`)
/// add to it.
///
/// One player stands for one media. A player made `gapless` can queue the media after its own
/// on the same mpv (`playNext`): mpv opens it ahead and plays on with no gap (gapless audio), and
/// the player `playNext` returns stands for that media — its events begin when it starts. mpv
/// quits once the last media queued on it has played out.
public final class MPVPlayer: MediaPlayer {
    public let program: String
    public let options: [String]
    /// Whether media can follow on this mpv with no gap (`playNext`).
    public let gapless: Bool
    public var playsGapless: Bool { gapless }
    public let events: AsyncStream<PlayerEvent>
    private let process: Process
    /// This player's media: its entry in mpv's playlist (mpv's `playlist_entry_id`; 1 is the
    /// media mpv starts with, each one queued after it the next number).
    private let entry: Int

    /// `program`: the mpv to run (a name looked up in PATH, or a path).
    public init(program: String = "mpv", options: [String] = [], gapless: Bool = false) {
        self.program = program
        self.options = options
        self.gapless = gapless
        let (events, sink) = AsyncStream.makeStream(of: PlayerEvent.self, bufferingPolicy: .unbounded)
        self.events = events
        process = Process()
        entry = 1
        process.state.withLock { $0.entries[1] = Entry(sink: sink) }
    }

    /// A player for the media queued as `entry` on `process`.
    private init(following player: MPVPlayer, process: Process, entry: Int, events: AsyncStream<PlayerEvent>) {
        (program, options, gapless) = (player.program, player.options, player.gapless)
        (self.process, self.entry, self.events) = (process, entry, events)
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

    /// Opens `url` in a new mpv, or — for a player `playNext` returned — waits until the media
    /// queued there plays (`url` and `tracks` were given to `playNext`).
    public func play(_ url: URL, startSeconds: Double, tracks: PlayerTracks = PlayerTracks()) async throws(PlayerError) {
        try await play(url, startSeconds: startSeconds, tracks: tracks, paused: false)
    }

    public func play(_ url: URL, startSeconds: Double, tracks: PlayerTracks, paused: Bool) async throws(PlayerError) {
        if entry != 1 { return try await opened() }
        guard let path = Self.locate(program) else {
            throw .notInstalled(program: program, install: "on Debian or Ubuntu: sudo apt install mpv")
        }
        var template = Array((NSTemporaryDirectory() + "/farcast-mpv-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw .cannotPlay("cannot make a private folder for mpv's socket: \(String(cString: strerror(errno)))") }
        let folder = String(cString: made)
        let socketPath = folder + "/ipc"
        process.state.withLock { $0.folder = folder; $0.entries[1]?.position = startSeconds }
        // Idle when its playlist ends: mpv quits when we say (on its `idle` event), so media
        // queued just as the last one ends is never lost to mpv quitting by itself.
        let arguments = [path, "--idle=yes", "--pause", "--input-ipc-server=\(socketPath)", "--no-input-terminal", "--msg-level=all=error",
                         String(format: "--start=%.3f", max(0, startSeconds))]
            + (gapless ? ["--gapless-audio=yes", "--prefetch-playlist=yes"] : [])
            + Self.arguments(for: tracks) + options.map { "--" + $0 } + ["--", Self.argument(url)]
        let child: ChildProcess
        do { child = try await ChildProcess.spawn(arguments, ownGroup: true) } catch { throw .cannotPlay(error.description) }
        process.state.withLock { $0.child = child }
        let fd = try await connect(socketPath, child: child)
        process.state.withLock { $0.socket = fd }
        let process = process
        let reader = Thread { process.read(fd) }
        reader.name = "farcast mpv events"
        reader.start()
        process.send(["observe_property", 1, "time-pos"])
        process.send(["observe_property", 2, "pause"])
        process.send(["observe_property", 3, "volume"])
        process.send(["observe_property", 4, "mute"])
        process.send(["observe_property", 5, "current-tracks/audio"])
        process.send(["observe_property", 6, "current-tracks/sub"])
        // The file opens paused; the first playback-restart says it is ready at the start point.
        try await opened()
        for file in tracks.subtitleFiles {
            process.send(["sub-add", Self.argument(file.url), file.selected ? "select" : "auto",
                          file.title ?? file.language ?? file.url.lastPathComponent, file.language ?? ""])
        }
        // Paused was ours, not the user's: its change to false is no event (asked to stay
        // paused, it stays).
        let (position, playing, volume) = process.state.withLock { s in
            s.paused = paused
            return (s.entries[1]?.position ?? startSeconds, s.entries[1]?.tracks ?? PlayingTracks(), s.volume.map { ($0, s.muted) })
        }
        if !paused { process.send(["set_property", "pause", false]) }
        let sink = process.sink(1)
        sink?.yield(.started(position: position))
        sink?.yield(.tracks(playing))
        // The volume as it starts (its change events count from here).
        if let (level, muted) = volume { sink?.yield(.volume(level, muted: muted)) }
    }

    /// Waits until this player's media plays (the first playback-restart of its entry).
    private func opened() async throws(PlayerError) {
        let entry = entry
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Double, PlayerError>, Never>) in
            let early: Result<Double, PlayerError>? = process.state.withLock { s in
                guard let e = s.entries[entry] else { return .failure(.cannotPlay("mpv ended before playing")) }
                if e.started { return .success(e.position) }
                if e.ended { return .failure(e.failure ?? .cannotPlay("mpv ended before playing")) }
                s.entries[entry]?.opening = continuation
                return nil
            }
            if let early { continuation.resume(returning: early) }
        }
        _ = try result.get()
    }

    /// Queues `url` after this player's media on the same mpv, which plays on into it with no gap;
    /// nil when this player is not gapless or its mpv has ended (or is ending).
    public func playNext(_ url: URL, tracks: PlayerTracks) async -> (any MediaPlayer)? {
        guard gapless else { return nil }
        let (events, sink) = AsyncStream.makeStream(of: PlayerEvent.self, bufferingPolicy: .unbounded)
        let queued = process.state.withLock { s -> Int? in
            guard s.socket >= 0, !s.closing, !s.exited else { return nil }
            s.lastEntry += 1
            s.entries[s.lastEntry] = Entry(sink: sink)
            // Queued and, should mpv have gone idle meanwhile, started.
            Process.send(["loadfile", Self.argument(url), "append-play"], on: s.socket)
            return s.lastEntry
        }
        guard let queued else { return nil }
        return MPVPlayer(following: self, process: process, entry: queued, events: events)
    }

    /// What mpv is given to open: a local path or the URL.
    private static func argument(_ url: URL) -> String { url.isFileURL ? url.path : url.absoluteString }

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

    /// Commands reach mpv only while this player's media is the one playing.
    private func command(_ command: [Any]) {
        let entry = entry
        process.state.withLock { s in
            guard s.current == entry || (s.current == 0 && entry == 1), s.entries[entry]?.ended == false else { return }
            Process.send(command, on: s.socket)
        }
    }

    public func setPaused(_ paused: Bool) async { command(["set_property", "pause", paused]) }
    public func seek(to seconds: Double) async { command(["seek", max(0, seconds), "absolute"]) }
    public func setVolume(_ percent: Int) async { command(["set_property", "volume", min(100, max(0, percent))]) }
    public func setMuted(_ muted: Bool) async { command(["set_property", "mute", muted]) }
    public var position: Double { process.state.withLock { $0.entries[entry]?.position ?? 0 } }
    public var isPaused: Bool { process.state.withLock { $0.paused } }

    /// Stops mpv (and so any media queued after this one); nothing when this media has ended.
    public func stop() async {
        let entry = entry
        let child = process.state.withLock { s -> ChildProcess? in
            guard s.entries[entry]?.ended == false else { return nil }
            s.stopRequested = true
            s.closing = true
            Process.send(["quit"], on: s.socket)
            return s.child
        }
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

    // MARK: - The mpv process

    /// One media on the process: what its player hears and where it is.
    private struct Entry {
        let sink: AsyncStream<PlayerEvent>.Continuation
        var position: Double = 0
        var started = false
        var seeking = false
        var ended = false
        /// Why it could not play, when it could not.
        var failure: PlayerError?
        var tracks = PlayingTracks()
        /// Decoded to its end with nothing queued after it: its sound plays out (mpv's `idle`
        /// says when), and only then has it finished.
        var draining = false
        /// `play` waiting for the first playback-restart (or the reason it failed).
        var opening: CheckedContinuation<Result<Double, PlayerError>, Never>?
    }

    /// One mpv and its IPC socket, shared by the players of the media queued on it. Its reader
    /// thread hands each event to the player whose media mpv is playing.
    private final class Process: Sendable {
        struct State {
            var child: ChildProcess?
            var socket: Int32 = -1
            var folder: String?
            /// mpv's own pause, volume and mute (they carry from one media to the next).
            var paused = true
            var volume: Int?
            var muted = false
            /// The entry mpv plays (0: none started yet) and the last one queued.
            var current = 0
            var lastEntry = 1
            var entries: [Int: Entry] = [:]
            /// `quit` sent: nothing more is queued.
            var closing = false
            var stopRequested = false
            /// The socket closed: mpv is gone.
            var exited = false
        }

        let state = Mutex(State())

        deinit {
            let (socket, folder) = state.withLock { ($0.socket, $0.folder) }
            if socket >= 0 { close(socket) }
            if let folder {
                unlink(folder + "/ipc")
                rmdir(folder)
            }
        }

        func sink(_ entry: Int) -> AsyncStream<PlayerEvent>.Continuation? { state.withLock { $0.entries[entry]?.sink } }

        func send(_ command: [Any]) { state.withLock { Process.send(command, on: $0.socket) } }

        /// Sends one command (a JSON array) as a line (under the state's lock, so lines never mix).
        static func send(_ command: [Any], on socket: Int32) {
            guard socket >= 0, let data = try? JSONSerialization.data(withJSONObject: ["command": command]) else { return }
            let line = Array(data) + [0x0A]
            var offset = 0
            while offset < line.count {
                let written = line[offset...].withUnsafeBytes { cWrite(socket, $0.baseAddress, $0.count) }
                if written <= 0 { if errno == EINTR { continue } else { return } }
                offset += written
            }
        }

        /// The reader thread: mpv's lines until the socket closes (mpv quit).
        func read(_ fd: Int32) {
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
            // Every media not ended ends now: stopped when we (or the user, quitting) ended mpv.
            let work = state.withLock { s -> [() -> Void] in
                s.exited = true
                let reason: EndReason = s.closing || s.stopRequested ? .stopped : .failed("mpv closed its socket")
                return Self.endDrained(&s) + s.entries.keys.sorted().flatMap { Self.end(&s, entry: $0, reason) }
            }
            work.forEach { $0() }
        }

        private func handle(_ line: [UInt8]) {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any], let event = object["event"] as? String else { return }
            let entryId = (object["playlist_entry_id"] as? NSNumber)?.intValue
            // What to do once the lock is let go: events yielded, a `play` resumed.
            let work = state.withLock { s -> [() -> Void] in
                let current = s.current == 0 ? 1 : s.current
                guard var e = s.entries[current] else { return [] }
                var work: [() -> Void] = []
                func emit(_ event: PlayerEvent) { let sink = e.sink; work.append { sink.yield(event) } }
                switch event {
                case "property-change":
                    switch object["name"] as? String {
                    case "time-pos":
                        // Gapless: the next media's clock starts below zero while the last one's sound plays out.
                        guard let value = object["data"] as? Double else { return [] }
                        e.position = max(0, value)
                        if e.started && !e.seeking && !e.ended { emit(.position(e.position)) }
                    case "pause":
                        guard let value = object["data"] as? Bool, value != s.paused else { return [] }
                        s.paused = value
                        if e.started && !e.ended { emit(.paused(value, position: e.position)) }
                    case "volume":
                        guard let value = object["data"] as? Double else { return [] }
                        s.volume = Int(value.rounded())
                        if e.started && !e.ended { emit(.volume(Int(value.rounded()), muted: s.muted)) }
                    case "mute":
                        guard let value = object["data"] as? Bool else { return [] }
                        s.muted = value
                        if e.started && !e.ended, let volume = s.volume { emit(.volume(volume, muted: value)) }
                    case let name? where name == "current-tracks/audio" || name == "current-tracks/sub":
                        // The tracks are let go as the file unloads: that is no choice of the user's.
                        guard !e.ended, !s.stopRequested else { return [] }
                        let track = MPVPlayer.track(object["data"])
                        var tracks = e.tracks
                        if name == "current-tracks/audio" { tracks.audio = track } else { tracks.subtitle = track }
                        guard tracks != e.tracks else { return [] }
                        e.tracks = tracks
                        if e.started { emit(.tracks(tracks)) }
                    default:
                        return []
                    }
                case "seek":
                    e.seeking = true
                case "start-file":
                    if let entryId, s.entries[entryId] != nil { s.current = entryId }
                    return Self.endDrained(&s)
                case "playback-restart":
                    if !e.started {
                        // The start position is reached by a seek of mpv's own: that is no user's seek.
                        e.started = true
                        e.seeking = false
                        if let opening = e.opening {
                            let position = e.position
                            work.append { opening.resume(returning: .success(position)) }
                            e.opening = nil
                        }
                        // Media queued after the first plays on its own: it starts now (the first
                        // says so from `play`, once unpaused).
                        if current != 1 {
                            emit(.started(position: e.position))
                            emit(.tracks(e.tracks))
                            if let volume = s.volume { emit(.volume(volume, muted: s.muted)) }
                        }
                    } else if e.seeking {
                        e.seeking = false
                        emit(.seeked(position: e.position))
                    }
                case "end-file":
                    s.entries[current] = e
                    let ended = entryId ?? current
                    let reason: EndReason
                    switch object["reason"] as? String {
                    case "eof": reason = .finished
                    case "stop", "quit", "redirect": reason = .stopped
                    default: reason = .failed((object["file_error"] as? String).map { "mpv: \($0)" } ?? "mpv could not play the media")
                    }
                    if reason == .finished, ended >= s.lastEntry {
                        s.entries[ended]?.draining = true
                        return []
                    }
                    return Self.end(&s, entry: ended, reason)
                case "idle":
                    // The playlist has played out (its last sound included) and nothing more is
                    // queued: mpv quits. Media queued before this point plays; after it, `playNext`
                    // says no.
                    let work = Self.endDrained(&s)
                    if !s.closing, s.entries.values.allSatisfy(\.ended) {
                        s.closing = true
                        Process.send(["quit"], on: s.socket)
                    }
                    return work
                default:
                    return []
                }
                s.entries[current] = e
                return work
            }
            work.forEach { $0() }
        }

        /// Ends, as finished, the media whose sound was playing out.
        static func endDrained(_ s: inout State) -> [() -> Void] {
            s.entries.filter { $0.value.draining && !$0.value.ended }.keys.sorted().flatMap { end(&s, entry: $0, .finished) }
        }

        /// Ends `entry` once: a failure while opening goes to its `play`, then the last event.
        static func end(_ s: inout State, entry: Int, _ reason: EndReason) -> [() -> Void] {
            guard var e = s.entries[entry], !e.ended else { return [] }
            e.ended = true
            var reason = reason
            if case .failed = reason, s.stopRequested { reason = .stopped }
            var work: [() -> Void] = []
            if let opening = e.opening {
                let failure: PlayerError
                if case .failed(let why) = reason { failure = .cannotPlay(why) } else { failure = .cannotPlay("mpv ended before playing") }
                e.failure = failure
                work.append { opening.resume(returning: .failure(failure)) }
                e.opening = nil
            } else if !e.started, case .failed(let why) = reason {
                e.failure = .cannotPlay(why)
            }
            let sink = e.sink, position = e.position
            work.append {
                sink.yield(.ended(reason, position: position))
                sink.finish()
            }
            s.entries[entry] = e
            return work
        }
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
