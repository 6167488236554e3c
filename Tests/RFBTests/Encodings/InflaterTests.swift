import CZlib
import Testing
@testable import RFB

/// The connection's inflate streams (ISA-L on Linux, zlib elsewhere) against zlib's own
/// deflate: persistent sync-flushed streams as servers send them, streams that end and start
/// again (extended clipboard), and data that claims more than its rectangle.
struct InflaterTests {
    static func screenLike(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed
        var out = [UInt8]()
        out.reserveCapacity(count)
        while out.count < count {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let run = Int(state >> 58) + 1
            let value = UInt8(truncatingIfNeeded: state >> 40)
            out += [UInt8](repeating: value, count: min(run, count - out.count))
        }
        return out
    }

    /// One complete zlib stream (header, data, adler-32 trailer).
    static func completeStream(_ data: [UInt8]) -> [UInt8] {
        var length = uLongf(data.count + data.count / 100 + 64)
        var out = [UInt8](repeating: 0, count: Int(length))
        let status = out.withUnsafeMutableBufferPointer { o in data.withUnsafeBufferPointer { i in compress2(o.baseAddress, &length, i.baseAddress, uLong(i.count), 6) } }
        precondition(status == Z_OK)
        return Array(out[0..<Int(length)])
    }

    @Test func syncFlushedChunksOfEverySizeComeBackExactly() throws {
        let deflater = Deflater()
        let inflater = Inflater(name: "test")
        for (i, size) in [1, 7, 100, 1024, 4096, 40_000, 65_536, 300_000, 3].enumerated() {
            let data = Self.screenLike(size, seed: UInt64(i + 1))
            let compressed = deflater.compress(data)
            var out = [UInt8](repeating: 0, count: size)
            try compressed.withUnsafeBytes { input in
                try out.withUnsafeMutableBytes { try inflater.inflate(input, into: $0) }
            }
            #expect(out == data, "chunk \(i) of \(size) bytes")
        }
    }

    /// Two complete streams back to back, cut into two inputs at every position: the second
    /// stream's header and the first one's trailer may be anywhere, even in the input before.
    @Test func streamsThatEndAndStartAgainSplitAnywhere() throws {
        let first = Self.screenLike(3000, seed: 7), second = Self.screenLike(2000, seed: 8)
        let wire = Self.completeStream(first) + Self.completeStream(second)
        for cut in 0...wire.count {
            let inflater = Inflater(name: "test")
            var buffer: [UInt8] = []
            var result: [UInt8] = []
            for part in [Array(wire[..<cut]), Array(wire[cut...])] where !part.isEmpty {
                do {
                    let made = try part.withUnsafeBytes { try inflater.inflate($0, growing: &buffer, limit: 1 << 20) }
                    result += buffer[..<made]
                } catch {
                    Issue.record("cut at \(cut) of \(wire.count) (first stream \(Self.completeStream(first).count) bytes): \(error)")
                    return
                }
            }
            #expect(result == first + second, "cut at \(cut)")
            if result != first + second { return }
        }
    }

    @Test func dataPastTheRectangleIsRefused() {
        let deflater = Deflater()
        let compressed = deflater.compress(Self.screenLike(100_000, seed: 3))
        for room in [99_999, 50_000, 1] {
            let inflater = Inflater(name: "test")
            var out = [UInt8](repeating: 0, count: room)
            #expect(throws: RFBError.self, "room \(room)") {
                try compressed.withUnsafeBytes { input in try out.withUnsafeMutableBytes { try inflater.inflate(input, into: $0) } }
            }
        }
    }

    @Test func garbageIsATypedError() {
        let inflater = Inflater(name: "test")
        var out = [UInt8](repeating: 0, count: 64)
        let garbage: [UInt8] = [0x78, 0x9C, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x12]
        #expect(throws: RFBError.self) {
            try garbage.withUnsafeBytes { input in try out.withUnsafeMutableBytes { try inflater.inflate(input, into: $0) } }
        }
    }
}
