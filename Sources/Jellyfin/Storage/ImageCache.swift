internal import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Images by tag on disk, bounded in size.
///
/// Jellyfin gives every image a tag that changes when the image does, so an image fetched with
/// its tag never goes stale: the cache is keyed by item, type, index, tag and requested width,
/// and untagged images are not cached. Files are written atomically (temporary name, rename);
/// reading one marks it used (its modification time). When a store takes the total over
/// `maxBytes`, the least recently used files go until it is under 90 % of it. One lock orders
/// this process's use; another process sharing the folder can at worst evict early.
public final class ImageCache: Sendable {
    public let directory: String
    public let maxBytes: Int
    private let lock = Mutex(())

    public init(directory: String, maxBytes: Int = 256 << 20) throws {
        self.directory = directory
        self.maxBytes = max(maxBytes, 0)
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw JellyfinError.imageCache("cannot create the image cache folder \(directory): \(error.localizedDescription)")
            }
        } else if !isDirectory.boolValue {
            throw JellyfinError.imageCache("\(directory) is not a folder; move it away so Farcast can cache images there")
        }
    }

    /// What identifies one cached image.
    public struct Key: Sendable, Hashable {
        public var itemId: String
        public var imageType: String
        public var index: Int?
        public var tag: String
        public var maxWidth: Int?

        public init(itemId: String, imageType: String, index: Int? = nil, tag: String, maxWidth: Int? = nil) {
            self.itemId = itemId
            self.imageType = imageType
            self.index = index
            self.tag = tag
            self.maxWidth = maxWidth
        }

        /// A file name: the fields when they are plain (hex ids and tags are), else a hash.
        var fileName: String {
            let plain = "\(itemId)_\(imageType)_\(index ?? 0)_\(tag)_\(maxWidth ?? 0)"
            let safe = plain.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F || c == 0x2D
            }
            if safe && plain.utf8.count <= 200 { return plain + ".img" }
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in plain.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            return "h" + String(hash, radix: 16) + ".img"
        }
    }

    /// The cached bytes, or nil.
    public func bytes(for key: Key) -> [UInt8]? {
        lock.withLock { _ in
            let path = directory + "/" + key.fileName
            guard let data = FileManager.default.contents(atPath: path) else { return nil }
            // Mark as used now (LRU by modification time).
            _ = utimes(path, nil)
            return Array(data)
        }
    }

    /// Stores bytes (larger than the whole cache: not stored) and trims the cache to its bound.
    public func store(_ bytes: [UInt8], for key: Key) throws {
        guard bytes.count <= maxBytes else { return }
        try lock.withLock { _ in
            let path = directory + "/" + key.fileName
            let temp = path + ".tmp-\(getpid())"
            guard FileManager.default.createFile(atPath: temp, contents: Data(bytes), attributes: [.posixPermissions: 0o600]) else {
                throw JellyfinError.imageCache("cannot write \(temp): \(String(cString: strerror(errno)))")
            }
            guard rename(temp, path) == 0 else {
                let reason = String(cString: strerror(errno))
                unlink(temp)
                throw JellyfinError.imageCache("cannot write \(path): \(reason)")
            }
            trim()
        }
    }

    /// Bytes in the cache now.
    public var totalBytes: Int {
        lock.withLock { _ in entries().reduce(0) { $0 + $1.size } }
    }

    private struct Entry { var path: String; var size: Int; var used: Double }

    private func entries() -> [Entry] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        return names.compactMap { name in
            guard name.hasSuffix(".img") else { return nil }
            let path = directory + "/" + name
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            #if canImport(Darwin)
            let used = Double(info.st_mtimespec.tv_sec) + Double(info.st_mtimespec.tv_nsec) / 1e9
            #else
            let used = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
            #endif
            return Entry(path: path, size: Int(info.st_size), used: used)
        }
    }

    private func trim() {
        var all = entries()
        var total = all.reduce(0) { $0 + $1.size }
        guard total > maxBytes else { return }
        all.sort { $0.used < $1.used }
        let target = maxBytes / 10 * 9
        for entry in all where total > target {
            if unlink(entry.path) == 0 { total -= entry.size }
        }
    }
}
