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
    public func download(_ item: JellyfinItem, to path: String, limits: DownloadLimits = .init(), expectedBytes: Int64? = nil,
                         progress: @escaping @Sendable (Int64, Int64?) -> Void = { _, _ in }) async throws(DownloadError) -> DownloadedFile {
        let partPath = path + ".part"
        let folder = (path as NSString).deletingLastPathComponent
        do { try FileManager.default.createDirectory(atPath: folder.isEmpty ? "." : folder, withIntermediateDirectories: true) } catch {
            throw .file("cannot make \(folder): \(error.localizedDescription)")
        }
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
    private func fetch(_ url: URL, into fd: Int32, from offset: Int64, item: JellyfinItem, limits: DownloadLimits, folder: String,
                       progress: @escaping @Sendable (Int64, Int64?) -> Void) async throws(DownloadError) -> (total: Int64, resumedFrom: Int64) {
        let operation = "download \(item.name)"
        var request = HTTPClientRequest(url: url.absoluteString)
        request.headers.add(name: "Authorization", value: AuthorizationHeader.value(identity: server.identity, token: accessToken))
        if offset > 0 { request.headers.add(name: "Range", value: "bytes=\(offset)-") }
        let response: HTTPClientResponse
        do { response = try await server.transport.httpClient.execute(request, deadline: .distantFuture) } catch {
            throw .server(JellyfinError.from(error, operation: operation, url: server.address.description, timeout: server.transport.timeout))
        }
        let status = Int(response.status.code)
        let start: Int64
        let total: Int64
        switch status {
        case 200:
            // The whole file (a server that ignores Range starts over).
            start = 0
            guard let length = response.headers.first(name: "content-length").flatMap({ Int64($0) }) else {
                throw .inconsistent(item: item.name, reason: "no Content-Length")
            }
            total = length
        case 206:
            guard let range = response.headers.first(name: "content-range"), let parsed = Self.contentRange(range), parsed.start == offset else {
                throw .inconsistent(item: item.name, reason: "a partial answer for another range than bytes=\(offset)-")
            }
            (start, total) = (parsed.start, parsed.total)
        case 416 where offset > 0:
            // The part is already whole (or longer than the file): check it as it is.
            let total = response.headers.first(name: "content-range").flatMap(Self.unsatisfiedTotal) ?? offset
            return (total, offset)
        default:
            throw .server(server.unexpected(operation, status: status))
        }
        if let cap = limits.maxBytes, total > cap { throw .tooLarge(item: item.name, bytes: total, cap: cap) }
        try Self.checkFreeSpace(item: item.name, needed: total - start, reserve: limits.reserveBytes, folder: folder)
        guard ftruncate(fd, off_t(start)) == 0, lseek(fd, off_t(start), SEEK_SET) >= 0 else {
            throw .file("cannot write the part file: \(String(cString: strerror(errno)))")
        }
        var received = start
        progress(received, total)
        do {
            for try await buffer in response.body {
                guard received + Int64(buffer.readableBytes) <= total else {
                    throw DownloadError.inconsistent(item: item.name, reason: "more bytes than the \(total) it announced")
                }
                try buffer.withUnsafeReadableBytes { raw in
                    var offset = 0
                    while offset < raw.count {
                        let written = write(fd, raw.baseAddress! + offset, raw.count - offset)
                        if written < 0 {
                            if errno == EINTR { continue }
                            throw DownloadError.file("cannot write the part file: \(String(cString: strerror(errno)))")
                        }
                        offset += written
                    }
                }
                received += Int64(buffer.readableBytes)
                progress(received, total)
            }
        } catch let error as DownloadError {
            throw error
        } catch {
            // The connection broke mid-file (dropped, timed out): what came is kept for next time.
            throw .lengthMismatch(item: item.name, expected: total, received: received)
        }
        guard received == total else { throw .lengthMismatch(item: item.name, expected: total, received: received) }
        return (total, start)
    }
    #else
    private func fetch(_ url: URL, into fd: Int32, from offset: Int64, item: JellyfinItem, limits: DownloadLimits, folder: String,
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
