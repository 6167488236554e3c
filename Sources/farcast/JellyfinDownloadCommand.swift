import ArgumentParser
import FarcastSupport
import Foundation
import Jellyfin

#if canImport(Glibc)
import Glibc
#endif

extension DownloadTranscode: ExpressibleByArgument {
    public init?(argument: String) {
        guard let preset = DownloadTranscode.preset(named: argument) else { return nil }
        self = preset
    }

    public static var allValueStrings: [String] { presets.map(\.name) }
}

struct JellyfinDownloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "download",
        abstract: "Download items' original files: a film, an episode, a season, a series, an album.",
        discussion: """
            Files are saved under DIR as Jellyfin's own apps lay them out: "Film (Year).ext", "Series/Season N/Series - S01E02 - Title.ext", "Artist/Album/01 - Title.ext". Each file arrives as NAME.part and is renamed only when its length matches what the server stated, so a file that is there is whole. An interrupted download (Ctrl-C, a lost connection) is resumed where it stopped the next time, with a Range request; a file already complete is skipped.

            Several files download at once (--parallel). Before each, the free space is checked (what is left to fetch plus --reserve MiB must fit) and --max-size refuses files above a size. The server must allow the user to download (a real server's "Allow media downloading" permission).

            Every complete file is recorded in the offline index with the item's description and picture: `farcast jellyfin offline ls` lists the downloads and `farcast jellyfin play --offline ITEM` plays them with no server.

            Examples:
              farcast jellyfin download "Test Pattern" -o ~/Videos/jellyfin
              farcast jellyfin download "Signal Tests" -o ~/Videos/jellyfin --parallel 3
              farcast jellyfin download "Test Tones" -o ~/Music --json
              farcast jellyfin download "Colour Bars" -o ~/Videos/phone --transcode 720p
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: ArgumentHelp("What to download: a film, episode, season, series, album, playlist or track (name or id).", valueName: "ITEM"))
    var item: String

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("The folder to save into (made if missing).", valueName: "dir"))
    var output: String

    @Option(help: ArgumentHelp("Files downloaded at once.", valueName: "n"))
    var parallel: Int = 2

    @Option(help: ArgumentHelp("Refuse files larger than this many MiB.", valueName: "mib"))
    var maxSize: Double?

    @Option(help: ArgumentHelp("Keep this many MiB free on the disk.", valueName: "mib"))
    var reserve: Int = 256

    @Option(help: ArgumentHelp("Download the server's transcode instead of the original file: 1080p, 720p, 480p or 360p (H.264 and AAC in MP4, saved as NAME - 720p.mp4). A transcode cannot resume: an interrupted one starts over.", valueName: "size"))
    var transcode: DownloadTranscode?

    func validate() throws {
        guard (1...16).contains(parallel) else { throw ValidationError("--parallel must be 1…16") }
        if let maxSize { guard maxSize > 0, maxSize.isFinite else { throw ValidationError("--max-size must be positive") } }
        guard reserve >= 0 else { throw ValidationError("--reserve must be 0 or more") }
    }

    func run() async throws {
        // The folder is made (or found writable) before connecting: a mistake there is the command line's.
        if let reason = Self.makeFolders(output) {
            throw CommandFailure(message: "cannot make the download folder \(output): \(reason)", exitCode: 2)
        }
        guard access(output, W_OK) == 0 else {
            throw CommandFailure(message: "cannot write into the download folder \(output): \(String(cString: strerror(errno)).lowercased())", exitCode: 2)
        }
        try await reportingFailures {
            let (session, account) = try await target.connect()
            let resolved = try await JellyfinCLI.resolveItem(item, in: session)
            let items = try await Self.files(of: resolved, in: session)
            guard !items.isEmpty else { throw CommandFailure(message: "\(resolved.name) has nothing to download") }
            let limits = DownloadLimits(maxBytes: maxSize.map { Int64($0 * 1_048_576) }, reserveBytes: Int64(reserve) << 20)
            let meter = ProgressMeter(files: items.count, enabled: !global.json && !global.quiet && isatty(2) == 1)
            let folder = output, transcode = self.transcode
            let started = ContinuousClock.now
            let results: [Row] = await withTaskGroup(of: Row.self) { group in
                var rows: [Row] = []
                var next = 0
                func add() {
                    guard next < items.count else { return }
                    let item = items[next]
                    next += 1
                    group.addTask {
                        let path = folder + "/" + Self.relativePath(for: item, transcode: transcode)
                        if transcode == nil, let size = item.fileSize, Self.size(of: path) == size {
                            meter.finished(item.id, bytes: size)
                            return Row(item: item, path: path, bytes: size, state: "present")
                        }
                        // A transcode is renamed into place only once the server ended it properly.
                        if transcode != nil, let size = Self.size(of: path) {
                            meter.finished(item.id, bytes: size)
                            return Row(item: item, path: path, bytes: size, state: "present")
                        }
                        do {
                            let file = try await session.download(item, to: path, limits: limits, expectedBytes: transcode == nil ? item.fileSize : nil,
                                                                  transcode: transcode) { received, total in
                                meter.update(item.id, received: received, total: total)
                            }
                            meter.finished(item.id, bytes: file.bytes)
                            return Row(item: item, path: path, bytes: file.bytes, state: file.resumedFrom > 0 ? "resumed" : "downloaded",
                                       resumedFrom: file.resumedFrom)
                        } catch {
                            meter.finished(item.id, bytes: 0)
                            return Row(item: item, path: path, bytes: 0, state: "failed", error: describe(error))
                        }
                    }
                }
                for _ in 0..<parallel { add() }
                while let row = await group.next() {
                    rows.append(row)
                    add()
                }
                return rows
            }
            meter.clear()
            let recorded = await Self.record(results, items: items, in: session, account: account)
            let seconds = Double((ContinuousClock.now - started).components.attoseconds) / 1e18 + Double((ContinuousClock.now - started).components.seconds)
            let ordered = items.compactMap { item in recorded.first { $0.id == item.id } }
            if global.json {
                try printJSONList(ordered)
            } else if !global.quiet {
                for row in ordered {
                    switch row.state {
                    case "failed": print("failed      \(row.name): \(row.error ?? "")")
                    case "present": print("present     \(row.path)")
                    default: print("\(row.state.padding(toLength: 11, withPad: " ", startingAt: 0)) \(row.path) (\(DownloadError.size(row.bytes)))")
                    }
                }
                let bytes = ordered.reduce(Int64(0)) { $0 + ($1.state == "present" ? 0 : $1.bytes) }
                if bytes > 0, seconds > 0 { print(String(format: "%@ in %.1f s (%.1f MB/s)", DownloadError.size(bytes), seconds, Double(bytes) / seconds / 1e6)) }
            }
            let failed = ordered.filter { $0.state == "failed" }
            if let first = failed.first {
                throw CommandFailure(message: failed.count == 1 ? first.error ?? "download failed" : "\(failed.count) of \(ordered.count) downloads failed (first: \(first.error ?? ""))")
            }
        }
    }

    /// Records the files that are whole in the offline index, each with its primary image, so
    /// `offline ls` and `play --offline` find them with no server. A file that cannot be recorded
    /// is a failed row (the file stays).
    static func record(_ rows: [Row], items: [JellyfinItem], in session: JellyfinSession, account: OfflineAccount) async -> [Row] {
        let library: OfflineLibrary
        do { library = try OfflineLibrary(path: OfflineLibrary.defaultPath()) } catch {
            return rows.map { row in
                guard row.state != "failed" else { return row }
                var failed = row
                (failed.state, failed.error) = ("failed", "downloaded, but \(describe(error))")
                return failed
            }
        }
        var recorded: [Row] = []
        for var row in rows {
            if row.state != "failed", let item = items.first(where: { $0.id == row.id }) {
                var image: [UInt8]?
                if let tag = item.imageTags[ImageType.primary.rawValue] {
                    image = try? await session.image(itemId: item.id, type: .primary, tag: tag, maxWidth: 800).bytes
                }
                do { try library.record(item, account: account, filePath: Self.absolute(row.path), fileBytes: row.bytes, image: image) } catch {
                    (row.state, row.error) = ("failed", "downloaded, but \(describe(error))")
                }
            }
            recorded.append(row)
        }
        return recorded
    }

    /// `path` from the root (the index must find it from any folder).
    static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }

    /// The playable items `item` stands for: itself, or a season's, series' or album's children.
    static func files(of item: JellyfinItem, in session: JellyfinSession) async throws -> [JellyfinItem] {
        switch item.kind {
        case .series:
            let listed = try await session.episodes(seriesId: item.id)
            return try await detailed(listed, in: session)
        case .season, .musicAlbum, .playlist:
            return try await detailed(try await JellyfinPlayCommand.queue(for: item, in: session, next: false), in: session)
        default:
            if item.isFolder { throw CommandFailure(message: "\(item.name) is a \(item.kind.rawValue.lowercased()): name a film, episode, season, series, album or track") }
            return [item]
        }
    }

    /// Listings leave out the file size; the detail has it (for the skip and the checks).
    static func detailed(_ items: [JellyfinItem], in session: JellyfinSession) async throws -> [JellyfinItem] {
        var result: [JellyfinItem] = []
        for item in items { result.append(item.fileSize == nil ? try await session.item(item.id) : item) }
        return result
    }

    /// Where an item goes under the output folder, as Jellyfin's apps name downloads.
    static func relativePath(for item: JellyfinItem, transcode: DownloadTranscode? = nil) -> String {
        guard let transcode else { return relativePath(for: item) }
        let original = relativePath(for: item)
        return (original as NSString).deletingPathExtension + " - \(transcode.name).mp4"
    }

    static func relativePath(for item: JellyfinItem) -> String {
        func clean(_ text: String) -> String {
            let mapped = text.map { "/\\:*?\"<>|\u{0}".contains($0) ? "_" : $0 }
            let trimmed = String(mapped).trimmingCharacters(in: CharacterSet(charactersIn: " ."))
            return trimmed.isEmpty ? "_" : String(trimmed.prefix(150))
        }
        let ext = (item.path.map { ($0 as NSString).pathExtension } ?? "").isEmpty
            ? (item.container?.split(separator: ",").first.map(String.init) ?? "bin") : (item.path! as NSString).pathExtension
        switch item.kind {
        case .episode:
            let series = clean(item.seriesName ?? "Series")
            let season = item.parentIndexNumber.map { "Season \($0)" } ?? clean(item.seasonName ?? "Season")
            let number = String(format: "S%02dE%02d", item.parentIndexNumber ?? 0, item.indexNumber ?? 0)
            return "\(series)/\(season)/\(series) - \(number) - \(clean(item.name)).\(ext)"
        case .audio:
            let artist = clean(item.albumArtist ?? item.artists.first ?? "Unknown Artist")
            let album = clean(item.album ?? "Unknown Album")
            let track = item.indexNumber.map { String(format: "%02d - ", $0) } ?? ""
            return "\(artist)/\(album)/\(track)\(clean(item.name)).\(ext)"
        default:
            return clean(item.name + (item.productionYear.map { " (\($0))" } ?? "")) + ".\(ext)"
        }
    }

    /// `mkdir -p`: nil when `path` is a folder now, else the OS reason.
    static func makeFolders(_ path: String) -> String? {
        var built = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            built += "/" + part
            if mkdir(built, 0o755) != 0 && errno != EEXIST { return String(cString: strerror(errno)).lowercased() }
            var info = stat()
            guard stat(built, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return "\(built) is not a folder" }
        }
        return nil
    }

    static func size(of path: String) -> Int64? {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : nil
    }

    struct Row: Encodable, Sendable {
        var id: String
        var name: String
        var path: String
        var bytes: Int64
        /// downloaded, resumed, present (already complete), failed.
        var state: String
        var resumedFrom: Int64?
        var error: String?

        init(item: JellyfinItem, path: String, bytes: Int64, state: String, resumedFrom: Int64? = nil, error: String? = nil) {
            (id, name, self.path, self.bytes, self.state, self.resumedFrom, self.error) = (item.id, item.name, path, bytes, state, resumedFrom, error)
        }
    }
}

/// One line on stderr while files download: files done, bytes and rate (a terminal only).
final class ProgressMeter: Sendable {
    private struct State {
        var received: [String: Int64] = [:]
        var totals: [String: Int64] = [:]
        var done = 0
        var lastDrawn = ContinuousClock.now - .seconds(1)
    }
    private let state = Locked(State())
    private let files: Int
    private let enabled: Bool
    private let started = ContinuousClock.now

    init(files: Int, enabled: Bool) { (self.files, self.enabled) = (files, enabled) }

    func update(_ id: String, received: Int64, total: Int64?) {
        guard enabled else { return }
        let line: String? = state.withLock { s in
            s.received[id] = received
            if let total { s.totals[id] = total }
            let now = ContinuousClock.now
            guard now - s.lastDrawn >= .milliseconds(200) else { return nil }
            s.lastDrawn = now
            return Self.line(s, files: files, since: started)
        }
        if let line { FileHandle.standardError.write(Data(("\r\u{1B}[K" + line).utf8)) }
    }

    func finished(_ id: String, bytes: Int64) {
        guard enabled else { return }
        state.withLock { s in
            s.done += 1
            s.received[id] = bytes
            s.totals[id] = bytes
        }
    }

    func clear() {
        if enabled { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    private static func line(_ s: State, files: Int, since start: ContinuousClock.Instant) -> String {
        let received = s.received.values.reduce(0, +), total = s.totals.values.reduce(0, +)
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = seconds > 0 ? Double(received) / seconds / 1e6 : 0
        let percent = total > 0 ? Int(Double(received) / Double(total) * 100) : 0
        return "\(s.done)/\(files) files  \(DownloadError.size(received)) of \(DownloadError.size(total)) (\(percent) %)  \(String(format: "%.1f", rate)) MB/s"
    }
}
