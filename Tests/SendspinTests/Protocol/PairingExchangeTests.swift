import Crypto
import Foundation
@testable import Sendspin
import Testing

/// The pairing state machine on its own: both methods, the CPace exchange against a server
/// side computed here, and messages that arrive outside an attempt.
@Suite struct PairingExchangeTests {
    static let fixedKey = [UInt8](repeating: 7, count: 32)
    static let code = Array("12345678".utf8)
    static let handshakeHash = [UInt8](repeating: 0x5A, count: 32)

    static func exchange(code: [UInt8]? = code, window: Int64? = nil) -> PairingExchange {
        PairingExchange(staticCode: code, suite: .chaChaPoly, windowUntil: window, randomKey: { fixedKey })
    }

    /// The JSON objects among `outputs` that go out, in order.
    static func sent(_ outputs: [PairingExchange.Output]) throws -> [[String: Any]] {
        try outputs.compactMap { output in
            guard case .send(let text) = output else { return nil }
            return try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        }
    }

    /// A server message as the session hands it over: the whole envelope.
    static func message(_ type: String, _ payload: String) -> [UInt8] { Array(#"{"type":"\#(type)","payload":\#(payload)}"#.utf8) }

    static func payload(_ message: [String: Any]) -> [String: Any] { message["payload"] as? [String: Any] ?? [:] }

    @Test func thePairingPSKMethodSendsInitAndFinalizeAndKeepsThePSKUntilTheServerConfirms() throws {
        var pairing = Self.exchange(code: nil)
        let outputs = pairing.start(PairingActivation(method: "pairing_psk", format: nil), category: .pairing, now: 0)
        let messages = try Self.sent(outputs)
        #expect(messages.map { $0["type"] as? String } == ["client/pair-init", "client/pair-finalize"])
        #expect(Self.payload(messages[0])["pairing_index"] as? Int == 1)
        #expect(Self.payload(messages[1])["long_term_psk"] as? String == Base64URL.encode(Self.fixedKey))
        #expect(outputs.last == .event(.pairingStarted(method: "pairing_psk")))
        let record = pairing.receiveFinalize(serverID: "server-a")
        #expect(record?.pskBytes == Self.fixedKey && record?.serverID == "server-a")
        let again = pairing.receiveFinalize(serverID: "server-a")
        #expect(again == nil, "one confirmation per attempt")
    }

    @Test func anotherMethodOrTheWrongKeyIsRefusedWithPairAbort() throws {
        var pairing = Self.exchange(code: nil)
        let outputs = pairing.start(PairingActivation(method: "pairing_psk", format: nil), category: .sentinel, now: 0)
        #expect(try Self.sent(outputs).map { Self.payload($0)["reason"] as? String } == ["method_not_supported"])
        #expect(outputs.last == .event(.pairingAborted("the server asked for pairing method 'pairing_psk' on a sn session; this player pairs by its pairing token (pairing_psk)")))
        let record = pairing.receiveFinalize(serverID: "server-a")
        #expect(record == nil)
        #expect(pairing.index == 1)
        pairing.restart()
        #expect(pairing.index == 0)
    }

    @Test func aCodeAttemptOutsideTheWindowIsHeldUntilItOpens() throws {
        var pairing = Self.exchange(window: 100)
        let held = pairing.start(PairingActivation(method: "static_pairing_code", format: nil), category: .sentinel, now: 100)
        #expect(try Self.sent(held).map { $0["type"] as? String } == ["client/pair-pending"])
        #expect(pairing.isHeld)
        let notResumed = pairing.openWindow(until: 500, now: 200, resume: false)
        #expect(notResumed.isEmpty, "not resumed outside a pairing activation")
        let resumed = pairing.openWindow(until: 500, now: 200, resume: true)
        #expect(try Self.sent(resumed).map { $0["type"] as? String } == ["client/pair-init"])
        #expect(resumed.last == .event(.pairingStarted(method: "static_pairing_code")))
    }

    @Test func theCodeExchangeAnswersTheServersShareAndWrapsTheLongTermPSK() throws {
        var pairing = Self.exchange(window: 1_000)
        _ = pairing.start(PairingActivation(method: "static_pairing_code", format: nil), category: .sentinel, now: 10)
        // The server's side of CPace, from the same public functions.
        let sid = CPace.sessionID(handshakeHash: Self.handshakeHash, pairingIndex: 1)
        let g = CPace.generator(password: Self.code, sessionID: sid)
        let serverScalar = [UInt8](repeating: 3, count: 32)
        let ya = try #require(CPace.x25519(scalar: serverScalar, u: g))
        let auth = try pairing.receiveShare(Self.message("server/pair-auth", #"{"pake_msg_1":"\#(Base64URL.encode(ya))"}"#), handshakeHash: Self.handshakeHash)
        let answer = try #require(try Self.sent(auth).first)
        let yb = try #require(Base64URL.decode(Self.payload(answer)["pake_msg_2"] as? String ?? ""))
        let k = try #require(CPace.x25519(scalar: serverScalar, u: yb))
        let keys = CPace.keys(sessionID: sid, k: k, ya: ya, yb: yb)
        let confirm = try pairing.receiveConfirmation(Self.message("server/pair-confirm", #"{"server_kc":"\#(Base64URL.encode(keys.serverConfirmation))"}"#))
        let messages = try Self.sent(confirm)
        #expect(messages.map { $0["type"] as? String } == ["client/pair-confirm", "client/pair-finalize"])
        #expect(Self.payload(messages[0])["client_kc"] as? String == Base64URL.encode(keys.clientConfirmation))
        let wrapped = try CPace.wrap(psk: Self.fixedKey, key: keys.pskWrapKey, suite: .chaChaPoly)
        #expect(Self.payload(messages[1])["wrapped_psk"] as? String == Base64URL.encode(wrapped))
        let record = pairing.receiveFinalize(serverID: "server-b")
        #expect(record?.pskBytes == Self.fixedKey)
    }

    @Test func aWrongConfirmationAbortsWithPairingCodeMismatch() throws {
        var pairing = Self.exchange(window: 1_000)
        _ = pairing.start(PairingActivation(method: "static_pairing_code", format: nil), category: .sentinel, now: 10)
        let ya = try #require(CPace.x25519(scalar: [UInt8](repeating: 3, count: 32),
                                           u: CPace.generator(password: Array("87654321".utf8), sessionID: CPace.sessionID(handshakeHash: Self.handshakeHash, pairingIndex: 1))))
        _ = try pairing.receiveShare(Self.message("server/pair-auth", #"{"pake_msg_1":"\#(Base64URL.encode(ya))"}"#), handshakeHash: Self.handshakeHash)
        let outputs = try pairing.receiveConfirmation(Self.message("server/pair-confirm", #"{"server_kc":"\#(Base64URL.encode([UInt8](repeating: 1, count: 64)))"}"#))
        #expect(try Self.sent(outputs).map { Self.payload($0)["reason"] as? String } == ["pairing_code_mismatch"])
        let record = pairing.receiveFinalize(serverID: "server-b")
        #expect(record == nil, "no PSK after a mismatch")
    }

    @Test func messagesOutsideAnAttemptAreUnexpectedAndAnActivationAbandonsOne() throws {
        var pairing = Self.exchange(window: 1_000)
        let share = try pairing.receiveShare(Array("{}".utf8), handshakeHash: [])
        #expect(share == [.unexpected("server/pair-auth outside a code attempt")])
        let confirmation = try pairing.receiveConfirmation(Array("{}".utf8))
        #expect(confirmation == [.unexpected("server/pair-confirm outside a code attempt")])
        let abandonedNothing = pairing.abandon()
        #expect(!abandonedNothing)
        _ = pairing.start(PairingActivation(method: "static_pairing_code", format: nil), category: .sentinel, now: 10)
        let abandoned = pairing.abandon()
        #expect(abandoned)
        let aborted = pairing.receiveAbort(Self.message("pair/abort", #"{"reason":"timeout"}"#))
        #expect(aborted == [.event(.pairingAborted("timeout"))])
    }
}
