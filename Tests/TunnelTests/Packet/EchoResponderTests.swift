@testable import Tunnel
import Testing

/// Echo requests and their replies as Scapy builds them (Fixtures/offload-vectors.json).
@Suite struct EchoResponderTests {
    @Test(arguments: OffloadVectors.shared.echo)
    func answersExactlyWhatScapyExpects(vector: OffloadVectors.Echo) {
        var packet = [UInt8](hex: vector.request)
        let original = packet
        let length = packet.withUnsafeMutableBytes { EchoResponder.answer($0) }
        if let reply = vector.reply {
            #expect(length == packet.count)
            #expect(packet.hex == reply)
        } else {
            #expect(length == nil)
            #expect(packet == original, "an unanswered packet must stay untouched")
        }
    }

    @Test func vectorsArePresent() {
        #expect(OffloadVectors.shared.echo.count >= 5, "Fixtures/offload-vectors.json missing: run scripts/vectors/make_tun_offload_vectors.py")
    }

    @Test func truncatedAndLyingPacketsGetNoAnswer() throws {
        let request = [UInt8](hex: try #require(OffloadVectors.shared.echo.first).request)
        for cut in 0..<request.count {
            var packet = Array(request[0..<cut])
            #expect(packet.withUnsafeMutableBytes { EchoResponder.answer($0) } == nil, "cut at \(cut)")
        }
        var lying = request
        lying[2] = 0xff  // total length beyond the packet
        #expect(lying.withUnsafeMutableBytes { EchoResponder.answer($0) } == nil)
    }
}
