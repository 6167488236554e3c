@testable import Punktfunk
import Testing

/// The 40-byte video header: every field at its offset, little-endian, and refusals.
@Suite struct VideoHeaderTests {
    @Test func everyFieldRoundTripsAtItsOffset() throws {
        let header = VideoHeader(
            ptsNanoseconds: 0x0102_0304_0506_0708, frameIndex: 0x1112_1314, streamSequence: 0x2122_2324,
            frameBytes: 0x3132_3334, userFlags: [.recoveryPoint, .recoveryClose], blockIndex: 0x4142, blockCount: 0x5152,
            dataShards: 0x6162, recoveryShards: 0x7172, shardIndex: 0x8182, shardBytes: 0x9192, version: 2,
            fecScheme: 0xA1, flags: [.picture, .startOfFrame])
        let bytes = header.bytes
        #expect(bytes == [
            0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x14, 0x13, 0x12, 0x11, 0x24, 0x23, 0x22, 0x21,
            0x34, 0x33, 0x32, 0x31, 0x10, 0x02, 0x00, 0x00, 0x42, 0x41, 0x52, 0x51, 0x62, 0x61, 0x72, 0x71,
            0x82, 0x81, 0x92, 0x91, 0xC9, 0x02, 0xA1, 0x05,
        ])
        #expect(try VideoHeader(parsing: bytes) == header)
    }

    @Test func shortOrForeignHeadersAreRefused() {
        #expect(throws: DataPlaneError.truncated(what: "video header", needed: 40, available: 39)) {
            try VideoHeader(parsing: [UInt8](repeating: 0, count: 39))
        }
        var bytes = VideoHeader().bytes
        bytes[36] = 0xC8
        #expect(throws: DataPlaneError.badMagic(0xC8)) { try VideoHeader(parsing: bytes) }
    }
}
