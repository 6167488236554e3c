@testable import Punktfunk
import Testing

@Suite struct ChannelFoldTests {
    @Test func surroundFoldsToStereoWithoutClipping() {
        // 5.1 in Vorbis order: FL, FC, FR, RL, RR, LFE.
        var out: [Float] = []
        ChannelFold.fold([1, 0, 0, 0, 0, 1], frames: 1, from: 6, to: 2, into: &out)
        #expect(abs(out[0] - 1 / (1 + 2 * 0.70710678)) < 1e-6 && out[1] == 0)   // front left only on the left; LFE dropped
        ChannelFold.fold([0, 1, 0, 0, 0, 0], frames: 1, from: 6, to: 2, into: &out)
        #expect(abs(out[0] - out[1]) < 1e-6 && out[0] > 0.29 && out[0] < 0.3)     // the centre on both at −3 dB
        ChannelFold.fold([Float](repeating: 1, count: 8), frames: 1, from: 8, to: 2, into: &out)
        #expect(out[0] <= 1.0001 && out[1] <= 1.0001 && out[0] > 0.99)
        ChannelFold.fold([1, 1, 1, 1, 1, 1], frames: 1, from: 6, to: 2, into: &out)
        #expect(out[0] <= 1.0001 && out[0] > 0.99)
    }

    @Test func stereoMonoAndPassThrough() {
        var out: [Float] = []
        ChannelFold.fold([0.5, -0.5, 1, 0], frames: 2, from: 2, to: 1, into: &out)
        #expect(Array(out.prefix(2)) == [0, 0.5])
        ChannelFold.fold([0.25], frames: 1, from: 1, to: 2, into: &out)
        #expect(Array(out.prefix(2)) == [0.25, 0.25])
        ChannelFold.fold([0.1, 0.2], frames: 1, from: 2, to: 2, into: &out)
        #expect(Array(out.prefix(2)) == [0.1, 0.2])
        // A short input is silence, not a crash.
        ChannelFold.fold([0.1], frames: 4, from: 2, to: 2, into: &out)
        #expect(out.prefix(8).allSatisfy { $0 == 0 })
    }
}
