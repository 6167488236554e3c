#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
internal import Foundation
#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
import NIOCore
import NIOHTTP1
#endif

/// Why a download stopped. Whatever was received stays in the `.part` file beside the target,
/// and the next download of the same item goes on from there.
public enum DownloadError: Error, Sendable, Equatable, CustomStringConvertible {
    case server(JellyfinError)
    /// The file is larger than the cap the user set.
    case tooLarge(item: String, bytes: Int64, cap: Int64)
    /// Too little free space for what is left to receive.
    case lowDisk(item: String, needed: Int64, free: Int64, folder: String)
    /// The bytes received do not add up to the size the server stated.
    case lengthMismatch(item: String, expected: Int64, received: Int64)
    /// The server's sizes disagree with each other (or with the Range asked for).
    case inconsistent(item: String, reason: String)
    case file(String)

    public var description: String {
        switch self {
        case .server(let error): return error.description
        case .tooLarge(let item, let bytes, let cap):
            return "\(item) is \(Self.size(bytes)), over the \(Self.size(cap)) cap (raise --max-size to fetch it)"
        case .lowDisk(let item, let needed, let free, let folder):
            return "not enough free space in \(folder) for \(item): \(Self.size(needed)) more needed, \(Self.size(free)) free"
        case .lengthMismatch(let item, let expected, let received):
            return "\(item): the download stopped after \(received) of \(expected) bytes; run it again to resume from there"
        case .inconsistent(let item, let reason):
            return "\(item): the server's answer does not add up (\(reason)); nothing was marked complete"
        case .file(let reason): return reason
        }
    }

    /// Bytes as a person reads them (KiB, MiB, GiB).
    public static func size(_ bytes: Int64) -> String {
        if bytes >= 1 << 30 { return String(format: "%.2f GiB", Double(bytes) / Double(1 << 30)) }
        if bytes >= 1 << 20 { return String(format: "%.1f MiB", Double(bytes) / Double(1 << 20)) }
        return String(format: "%.1f KiB", Double(bytes) / 1024)
    }
}

/// A server transcode to download instead of the original file: H.264 and AAC in MP4, no
/// taller than `maxHeight`, at about `videoBitrate` (bits/s).
public struct DownloadTranscode: Sendable, Equatable {
    public var name: String
    public var maxHeight: Int
    public var videoBitrate: Int
    public var audioBitrate: Int

    public init(name: String, maxHeight: Int, videoBitrate: Int, audioBitrate: Int = 128_000) {
        (self.name, self.maxHeight, self.videoBitrate, self.audioBitrate) = (name, maxHeight, videoBitrate, audioBitrate)
    }

    /// The sizes Jellyfin's apps offer, at their usual bitrates.
    public static let presets = [
        DownloadTranscode(name: "1080p", maxHeight: 1080, videoBitrate: 8_000_000, audioBitrate: 192_000),
        DownloadTranscode(name: "720p", maxHeight: 720, videoBitrate: 4_000_000),
        DownloadTranscode(name: "480p", maxHeight: 480, videoBitrate: 1_500_000),
        DownloadTranscode(name: "360p", maxHeight: 360, videoBitrate: 800_000, audioBitrate: 96_000),
    ]

    public static func preset(named name: String) -> DownloadTranscode? { presets.first { $0.name == name.lowercased() } }

    /// Bytes for `seconds` of media at these bitrates (for the free-space check; the server
    /// does not say how large a transcode will be).
    public func estimatedBytes(seconds: Double) -> Int64 { Int64(Double(videoBitrate + audioBitrate) / 8 * seconds) }
}

/// A finished download.
public struct DownloadedFile: Sendable, Equatable {
    public var itemId: String
    public var path: String
    public var bytes: Int64
    /// Bytes that were already there from an interrupted download.
    public var resumedFrom: Int64
}

/// How a download may go.
public struct DownloadLimits: Sendable {
    /// Refuse files larger than this (nil: no cap).
    public var maxBytes: Int64?
    /// Keep at least this much free on the disk after the download.
    public var reserveBytes: Int64

    public init(maxBytes: Int64? = nil, reserveBytes: Int64 = 256 << 20) { (self.maxBytes, self.reserveBytes) = (maxBytes, reserveBytes) }
}

extension JellyfinSession {
    /// Downloads `item`'s original file (`/Items/{id}/Download`) to `path`. Bytes go to
    /// `path.part`, which an interrupted download leaves behind and the next one continues with a
    /// Range request; the file is renamed into place only when its length matches what the
    /// server stated (and the item's own size, when the item states one). `progress` hears of
    /// (received so far, total) as bytes arrive.
    ///
    /// With `transcode`, the server's transcode of a video is fetched instead
    /// (`/Videos/{id}/stream.mp4`, `static=false`): its length is known only at its end, so it
    /// cannot resume and always starts over; it is complete when the server ends the stream
    /// properly (a connection that drops mid-way leaves the `.part`).
    public func download(_ item: JellyfinItem, to path: String, limits: DownloadLimits = .init(), expectedBytes: Int64? = nil,
                         transcode: DownloadTranscode? = nil,
                         progress: @escaping @Sendable (Int64, Int64?) -> Void = { _, _ in }) async throws(DownloadError) -> DownloadedFile {
        let partPath = path + ".part"
        let folder = (path as NSString).deletingLastPathComponent
        do { try FileManager.default.createDirectory(atPath: folder.isEmpty ? "." : folder, withIntermediateDirectories: true) } catch {
            throw .file("cannot make \(folder): \(error.localizedDescription)")
        }
        if let transcode { return try await downloadTranscode(item, transcode, to: path, limits: limits, folder: folder, progress: progress) }
        var have = Self.fileSize(partPath) ?? 0
        if let expectedBytes {
            if let cap = limits.maxBytes, expectedBytes > cap { throw .tooLarge(item: item.name, bytes: expectedBytes, cap: cap) }
            if have > expectedBytes { have = 0 }   // a part longer than the file is not this file's
            try Self.checkFreeSpace(item: item.name, needed: expectedBytes - have, reserve: limits.reserveBytes, folder: folder)
        }
        guard let url = authenticatedURL(path: "/Items/\(item.id)/Download") else {
            throw .server(.invalidAddress(server.address.description, reason: "no download URL"))
        }
        let fd = open(partPath, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .file("cannot write \(partPath): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let result = try await fetch(url, into: fd, from: have, item: item, limits: limits, folder: folder, progress: progress)
        if let expectedBytes, result.total != expectedBytes {
            throw .inconsistent(item: item.name, reason: "the item says \(expectedBytes) bytes, the download \(result.total)")
        }
        let size = Self.fileSize(partPath) ?? -1
        guard size == result.total else { throw .lengthMismatch(item: item.name, expected: result.total, received: size) }
        guard fsync(fd) == 0, rename(partPath, path) == 0 else {
            throw .file("cannot put \(path) in place: \(String(cString: strerror(errno)))")
        }
        return DownloadedFile(itemId: item.id, path: path, bytes: size, resumedFrom: result.resumedFrom)
    }

    private func downloadTranscode(_ item: JellyfinItem, _ transcode: DownloadTranscode, to path: String, limits: DownloadLimits, folder: String,
                                   progress: @escaping @Sendable (Int64, Int64?) -> Void) async throws(DownloadError) -> DownloadedFile {
        guard item.mediaType != "Audio", item.kind != .audio else {
            throw .file("\(item.name) is audio: a transcoded download is for video (download the original file without --transcode)")
        }
        if let runtime = item.runTimeTicks {
            let estimate = transcode.estimatedBytes(seconds: Double(runtime) / 10_000_000)
            if let cap = limits.maxBytes, estimate > cap { throw .tooLarge(item: item.name, bytes: estimate, cap: cap) }
            try Self.checkFreeSpace(item: item.name, needed: estimate, reserve: limits.reserveBytes, folder: folder)
        }
        let query: [(String, String)] = [
            ("static", "false"), ("MediaSourceId", item.id), ("DeviceId", server.identity.deviceId), ("Container", "mp4"),
            ("VideoCodec", "h264"), ("AudioCodec", "aac"), ("MaxHeight", "\(transcode.maxHeight)"),
            ("VideoBitrate", "\(transcode.videoBitrate)"), ("AudioBitrate", "\(transcode.audioBitrate)"), ("AudioChannels", "2"),
        ]
        var components = URLComponents(string: server.address.description + "/Videos/\(item.id)/stream.mp4")
        components?.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) }
        guard let url = components?.url else { throw .server(.invalidAddress(server.address.description, reason: "no transcode URL")) }
        let partPath = path + ".part"
        // A transcode's bytes differ from run to run: a part left from before is no prefix of this one.
        let fd = open(partPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .file("cannot write \(partPath): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let result = try await fetch(url, into: fd, from: 0, item: item, limits: limits, folder: folder, lengthKnown: false, progress: progress)
        let size = Self.fileSize(partPath) ?? -1
        guard size == result.total, size > 0 else { throw .lengthMismatch(item: item.name, expected: result.total, received: size) }
        guard fsync(fd) == 0, rename(partPath, path) == 0 else {
            throw .file("cannot put \(path) in place: \(String(cString: strerror(errno)))")
        }
        return DownloadedFile(itemId: item.id, path: path, bytes: size, resumedFrom: 0)
    }

    static func fileSize(_ path: String) -> Int64? {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : nil
    }

    static func checkFreeSpace(item: String, needed: Int64, reserve: Int64, folder: String) throws(DownloadError) {
        var stats = statvfs()
        guard statvfs(folder.isEmpty ? "." : folder, &stats) == 0 else { return }
        let free = Int64(stats.f_bavail) * Int64(stats.f_frsize)
        if needed + reserve > free { throw .lowDisk(item: item, needed: needed, free: free, folder: folder.isEmpty ? "." : folder) }
    }

    #if canImport(AsyncHTTPClient)
    /// One GET (from `offset` with a Range when there is a part), written at the part's end.
    /// The body is written where it arrives, on the connection's event loop (`PartWriter`): an
    /// async sequence of chunks handed to a task costs a thread hop per chunk and halved the
    /// throughput (scripts/bench jellyfin-download).
    private func fetch(_ url: URL, into fd: Int32, from offset: Int64, item: JellyfinItem, limits: DownloadLimits, folder: String,
                       lengthKnown: Bool = true,
                       progress: @escaping @Sendable (Int64, Int64?) -> Void) async throws(DownloadError) -> (total: Int64, resumedFrom: Int64) {
        let operation = "download \(item.name)"
        let request: HTTPClient.Request
        do {
            var headers = HTTPHeaders()
            headers.add(name: "Authorization", value: AuthorizationHeader.value(identity: server.identity, token: accessToken))
            if offset > 0 { headers.add(name: "Range", value: "bytes=\(offset)-") }
            request = try HTTPClient.Request(url: url.absoluteString, method: .GET, headers: headers)
        } catch {
            throw .server(.invalidAddress(url.absoluteString, reason: "\(error)"))
        }
        let writer = PartWriter(fd: fd, offset: offset, item: item.name, limits: limits, folder: folder, lengthKnown: lengthKnown, progress: progress) { status in
            self.server.unexpected(operation, status: status)
        }
        // The writer and the connection on one event loop: left to choose, the client may give
        // the delegate one loop and a pooled connection another, and every batch of body parts
        // then hops between the two threads (reads paused and resumed each time: 0.75× curl's
        // throughput instead of ≥ 0.9×, docs/benchmarks.md). A new connection is made if the
        // pooled one lives elsewhere — one connect for a whole file.
        let client = server.transport.httpClient
        let task = client.execute(request: request, delegate: writer, eventLoop: .delegateAndChannel(on: client.eventLoopGroup.next()), deadline: nil)
        do {
            return try await withTaskCancellationHandler {
                try await task.futureResult.get()
            } onCancel: {
                task.cancel()
            }
        } catch let error as DownloadError {
            throw error
        } catch {
            if let (total, received) = writer.bodyStarted {
                // The connection broke mid-file (dropped, timed out): what came is kept for next time.
                if !lengthKnown { throw .file("\(item.name): the transcode broke off after \(DownloadError.size(received)); run it again to start it over") }
                throw .lengthMismatch(item: item.name, expected: total, received: received)
            }
            throw .server(JellyfinError.from(error, operation: operation, url: server.address.description, timeout: server.transport.timeout))
        }
    }
    #else
    private func fetch(_ url: URL, into fd: Int32, from offset: Int64, item: JellyfinItem, limits: DownloadLimits, folder: String,
                       lengthKnown: Bool = true,
                       progress: @escaping @Sendable (Int64, Int64?) -> Void) async throws(DownloadError) -> (total: Int64, resumedFrom: Int64) {
        throw .file("downloads are not built for this platform yet")
    }
    #endif

    /// `bytes START-END/TOTAL` → start and total.
    static func contentRange(_ header: String) -> (start: Int64, end: Int64, total: Int64)? {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.hasPrefix("bytes "), let slash = text.firstIndex(of: "/") else { return nil }
        let range = text[text.index(text.startIndex, offsetBy: 6)..<slash].split(separator: "-", omittingEmptySubsequences: false)
        guard range.count == 2, let start = Int64(range[0]), let end = Int64(range[1]), let total = Int64(text[text.index(after: slash)...]),
              start <= end, end < total else { return nil }
        return (start, end, total)
    }

    /// `bytes */TOTAL` → total.
    static func unsatisfiedTotal(_ header: String) -> Int64? {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.hasPrefix("bytes */") else { return nil }
        return Int64(text.dropFirst(8))
    }
}

#if canImport(AsyncHTTPClient)
/// Writes a download's body into the part file as it arrives, on the connection's event loop:
/// the head decides where (a 206 must continue exactly where the part ends; a 200 starts over)
/// and whether at all (the size cap, the free space); every chunk is written at once, and the
/// total is checked at the end. @unchecked Sendable: AsyncHTTPClient calls it on the event loop,
/// one call at a time, and every mutable field is read and written under `lock` (the download
/// task reads `bodyStarted` from elsewhere after a failure).
private final class PartWriter: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = (total: Int64, resumedFrom: Int64)

    let fd: Int32
    let offset: Int64
    let item: String
    let limits: DownloadLimits
    let folder: String
    /// A transcode streams with no Content-Length: its total is what arrived when it ended.
    let lengthKnown: Bool
    let progress: @Sendable (Int64, Int64?) -> Void
    let unexpected: @Sendable (Int) -> JellyfinError
    private var start: Int64 = 0
    private var total: Int64?
    private var received: Int64 = 0
    private var alreadyWhole = false
    private var failure: DownloadError?
    private let lock = NSLock()

    init(fd: Int32, offset: Int64, item: String, limits: DownloadLimits, folder: String, lengthKnown: Bool = true,
         progress: @escaping @Sendable (Int64, Int64?) -> Void, unexpected: @escaping @Sendable (Int) -> JellyfinError) {
        (self.fd, self.offset, self.item, self.limits, self.folder, self.progress, self.unexpected) = (fd, offset, item, limits, folder, progress, unexpected)
        self.lengthKnown = lengthKnown
    }

    /// (total, received) once the body began: a later failure is a broken transfer.
    var bodyStarted: (Int64, Int64)? { lock.withLock { total.map { ($0, received) } } }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let eventLoop = task.eventLoop
        do throws(DownloadError) {
            try decide(head)
            return eventLoop.makeSucceededVoidFuture()
        } catch {
            lock.withLock { failure = error }
            return eventLoop.makeFailedFuture(error)
        }
    }

    private func decide(_ head: HTTPResponseHead) throws(DownloadError) {
        let status = Int(head.status.code)
        switch status {
        case 200:
            // The whole file (a server that ignores Range starts over).
            guard let length = head.headers.first(name: "content-length").flatMap({ Int64($0) }) else {
                guard !lengthKnown else { throw .inconsistent(item: item, reason: "no Content-Length") }
                try begin(at: 0, total: Int64.max)   // a transcode: as long as it turns out
                return
            }
            try begin(at: 0, total: length)
        case 206:
            guard let range = head.headers.first(name: "content-range"), let parsed = JellyfinSession.contentRange(range), parsed.start == offset else {
                throw .inconsistent(item: item, reason: "a partial answer for another range than bytes=\(offset)-")
            }
            try begin(at: parsed.start, total: parsed.total)
        case 416 where offset > 0:
            // The part is already whole (or longer than the file): it is checked as it is.
            let whole = head.headers.first(name: "content-range").flatMap(JellyfinSession.unsatisfiedTotal) ?? offset
            lock.withLock { (alreadyWhole, total, start, received) = (true, whole, offset, offset) }
        default:
            throw .server(unexpected(status))
        }
    }

    private func begin(at start: Int64, total: Int64) throws(DownloadError) {
        if total != .max {
            if let cap = limits.maxBytes, total > cap { throw .tooLarge(item: item, bytes: total, cap: cap) }
            try JellyfinSession.checkFreeSpace(item: item, needed: total - start, reserve: limits.reserveBytes, folder: folder)
        }
        guard ftruncate(fd, off_t(start)) == 0, lseek(fd, off_t(start), SEEK_SET) >= 0 else {
            throw .file("cannot write the part file: \(String(cString: strerror(errno)))")
        }
        lock.withLock { (self.start, self.total, self.received) = (start, total, start) }
        progress(start, total == .max ? nil : total)
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let eventLoop = task.eventLoop
        let (total, received, whole) = lock.withLock { (self.total ?? 0, self.received, alreadyWhole) }
        if whole { return eventLoop.makeSucceededVoidFuture() }   // a 416's own little body
        if total == .max, let cap = limits.maxBytes, received + Int64(buffer.readableBytes) > cap {
            let error = DownloadError.tooLarge(item: item, bytes: received + Int64(buffer.readableBytes), cap: cap)
            lock.withLock { failure = error }
            return eventLoop.makeFailedFuture(error)
        }
        guard received + Int64(buffer.readableBytes) <= total else {
            let error = DownloadError.inconsistent(item: item, reason: "more bytes than the \(total) it announced")
            lock.withLock { failure = error }
            return eventLoop.makeFailedFuture(error)
        }
        let failed: DownloadError? = buffer.withUnsafeReadableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return DownloadError.file("cannot write the part file: \(String(cString: strerror(errno)))")
                }
                offset += written
            }
            return nil
        }
        if let failed {
            lock.withLock { failure = failed }
            return eventLoop.makeFailedFuture(failed)
        }
        let now = lock.withLock { () -> Int64 in
            self.received += Int64(buffer.readableBytes)
            return self.received
        }
        progress(now, total == .max ? nil : total)
        return eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> Response {
        let (total, received, start, failure) = lock.withLock { (self.total, self.received, self.start, self.failure) }
        if let failure { throw failure }
        guard let total else { throw DownloadError.inconsistent(item: item, reason: "no answer") }
        if total == .max { return (received, 0) }   // a transcode ended properly: that is its length
        guard received == total else { throw DownloadError.lengthMismatch(item: item, expected: total, received: received) }
        return (total, start)
    }
}
#endif
