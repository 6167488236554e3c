@testable import Punktfunk
import Testing

/// A host closes the QUIC connection with a reason whose first word names the rejection
/// (the stand-in host writes "PairingRequired: this device is not paired"); the client turns the
/// ones it knows into typed errors and keeps any other close as it came.
struct HostRejectionTests {
    @Test func theFirstWordOfTheReasonNamesTheRejection() {
        func refined(_ reason: String) -> PunktfunkSessionError {
            PunktfunkClient.refine(.closedByHost(code: 0x10, reason: reason))
        }
        #expect(refined("PairingRequired: this device is not paired") == .pairingRequired)
        #expect(refined("PairingNotArmed: no PIN is armed on the host") == .pairingRefused("no PIN is armed on the host; start pairing on the host first"))
        #expect(refined("PairingBoundToOtherDevice") == .pairingRefused("the host's pairing window belongs to another device"))
        if case .malformed(let text) = refined("WireVersionMismatch: host speaks 2") {
            #expect(text.contains("host speaks 2"))
        } else {
            Issue.record("a wire version mismatch is not typed")
        }
        // Not a rejection's name, or only containing one: the close as it came.
        for reason in ["going away", "NotPairingRequired", "PairingRequiredSoon", ""] {
            #expect(refined(reason) == .closedByHost(code: 0x10, reason: reason), "\(reason)")
        }
        #expect(PunktfunkClient.refine(.idleTimeout(seconds: 8)) == .idleTimeout(seconds: 8))
    }
}
