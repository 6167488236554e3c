import Crypto
import FarcastSupport
import Testing
@testable import WireGuard

/// The handshake, cookies and transport against known answers made by an independent Python
/// implementation (scripts/gen/wireguard_vectors.py): same keys, ephemerals, indices and
/// timestamp in, the same bytes out, on both sides.
@Suite struct HandshakeTests {
    typealias V = HandshakeVectors
    let initiator = LocalIdentity(privateKey: try! PrivateKey(bytes: V.initiatorStatic))
    let responder = LocalIdentity(privateKey: try! PrivateKey(bytes: V.responderStatic))
    var initiatorSeesResponder: RemoteIdentity {
        RemoteIdentity(publicKey: responder.publicKey, presharedKey: try! PresharedKey(bytes: V.presharedKey))
    }
    var responderSeesInitiator: RemoteIdentity {
        RemoteIdentity(publicKey: initiator.publicKey, presharedKey: try! PresharedKey(bytes: V.presharedKey))
    }
    let now = MonotonicInstant(nanoseconds: 1_000_000_000)

    @Test func publicKeysAreTheVectorsOnes() {
        #expect(initiator.publicKey.bytes == V.initiatorPublic)
        #expect(responder.publicKey.bytes == V.responderPublic)
    }

    @Test func timestampIsTAI64NWithWhitenedNanoseconds() {
        #expect(TAI64N(secondsSince1970: V.timestampSeconds, nanoseconds: V.timestampNanoseconds).bytes == V.timestamp)
        #expect(TAI64N(secondsSince1970: 10, nanoseconds: 0) < TAI64N(secondsSince1970: 10, nanoseconds: 20_000_000))
        #expect(!(TAI64N(secondsSince1970: 10, nanoseconds: 1) < TAI64N(secondsSince1970: 10, nanoseconds: 2)),
                "nanoseconds below the whitening step do not order timestamps")
    }

    /// The whole exchange, byte for byte, and the keys both sides end with.
    @Test func bothSidesReproduceTheVectorsBytes() throws {
        let timestamp = TAI64N(secondsSince1970: V.timestampSeconds, nanoseconds: V.timestampNanoseconds)
        let (pending, unstamped) = try InitiatorHandshake.start(
            local: initiator, remote: initiatorSeesResponder, senderIndex: V.initiatorIndex,
            timestamp: timestamp, ephemeral: try PrivateKey(bytes: V.initiatorEphemeral))
        var jar = CookieJar(remote: initiatorSeesResponder)
        let initiation = jar.stamp(unstamped, now: now)
        #expect(initiation == V.initiation)

        #expect(MessageMACs.verifyMAC1(initiation, local: responder))
        guard case .initiation(let parsed) = try Message(parsing: initiation) else { Issue.record("not an initiation"); return }
        let consumed = try ConsumedInitiation(consuming: parsed, local: responder)
        #expect(consumed.peerPublicKey == initiator.publicKey)
        #expect(consumed.timestamp == timestamp)
        #expect(consumed.senderIndex == V.initiatorIndex)

        let (unstampedResponse, responderKeys) = try consumed.respond(
            remote: responderSeesInitiator, senderIndex: V.responderIndex, ephemeral: try PrivateKey(bytes: V.responderEphemeral))
        var responderJar = CookieJar(remote: responderSeesInitiator)
        let response = responderJar.stamp(unstampedResponse, now: now)
        #expect(response == V.response)

        #expect(MessageMACs.verifyMAC1(response, local: initiator))
        guard case .response(let parsedResponse) = try Message(parsing: response) else { Issue.record("not a response"); return }
        let initiatorKeys = try pending.finish(parsedResponse, local: initiator)
        func raw(_ key: SymmetricKey) -> [UInt8] { key.withUnsafeBytes { Array($0) } }
        #expect(raw(initiatorKeys.sendingKey) == V.initiatorToResponderKey)
        #expect(raw(initiatorKeys.receivingKey) == V.responderToInitiatorKey)
        #expect(raw(responderKeys.sendingKey) == V.responderToInitiatorKey)
        #expect(raw(responderKeys.receivingKey) == V.initiatorToResponderKey)
        #expect(initiatorKeys.remoteIndex == V.responderIndex && responderKeys.remoteIndex == V.initiatorIndex)

        var initiatorSession = TransportSession(keys: initiatorKeys, established: now)
        var responderSession = TransportSession(keys: responderKeys, established: now)
        let data = try initiatorSession.seal(V.packet)
        #expect(data == V.initiatorTransport0)
        guard case .transport(let receiver, let counter, let sealed) = try Message(parsing: data) else { Issue.record("not transport"); return }
        #expect(receiver == V.responderIndex && counter == 0)
        let opened = try responderSession.open(counter: counter, sealed: sealed)
        #expect(opened == V.packet + [UInt8](repeating: 0, count: 12), "padded to 32 bytes with zeros")
        #expect(try responderSession.seal([]) == V.responderKeepalive0)
    }

    @Test func aCookieReplyAndTheMAC2ItKeysMatchTheVectors() throws {
        var checker = CookieChecker(local: responder, secret: V.cookieSecret, now: now)
        let reply = checker.reply(to: V.initiation, senderIndex: V.initiatorIndex, source: V.cookieSource, now: now, nonce: V.cookieNonce)
        #expect(reply.bytes == V.cookieReply)

        // The initiator takes the cookie (bound to the MAC1 of the initiation it sent) and stamps
        // the same initiation again, now with MAC2.
        var jar = CookieJar(remote: initiatorSeesResponder)
        let (_, unstamped) = try InitiatorHandshake.start(
            local: initiator, remote: initiatorSeesResponder, senderIndex: V.initiatorIndex,
            timestamp: TAI64N(secondsSince1970: V.timestampSeconds, nanoseconds: V.timestampNanoseconds),
            ephemeral: try PrivateKey(bytes: V.initiatorEphemeral))
        _ = jar.stamp(unstamped, now: now)
        guard case .cookieReply(let parsed) = try Message(parsing: V.cookieReply) else { Issue.record("not a cookie reply"); return }
        try jar.consume(parsed, now: now)
        let again = jar.stamp(unstamped, now: now)
        #expect(again == V.initiationWithMAC2)
        #expect(checker.verifyMAC2(again, source: V.cookieSource, now: now))
        #expect(!checker.verifyMAC2(again, source: [127, 0, 0, 2, 0xCA, 0x6C], now: now), "a cookie is bound to its source")
        #expect(!checker.verifyMAC2(V.initiation, source: V.cookieSource, now: now), "no MAC2, no pass")

        // Two minutes later the cookie is stale: the initiator stops sending MAC2.
        let later = now.advanced(byNanoseconds: CookieJar.cookieLifetime)
        #expect(Array(jar.stamp(unstamped, now: later).suffix(16)) == [UInt8](repeating: 0, count: 16))
    }

    @Test func aCookieReplyForAnotherMessageIsRefused() throws {
        var checker = CookieChecker(local: responder, now: now)
        var jar = CookieJar(remote: initiatorSeesResponder)
        let (_, unstamped) = try InitiatorHandshake.start(local: initiator, remote: initiatorSeesResponder, senderIndex: 1)
        _ = jar.stamp(unstamped, now: now)
        // A reply bound to the vectors' initiation, not to the one this jar stamped.
        let reply = checker.reply(to: V.initiation, senderIndex: 1, source: V.cookieSource, now: now)
        #expect(throws: WireGuardError.decryptionFailed(field: "cookie of the cookie reply")) { try jar.consume(reply, now: now) }
        #expect(!jar.hasFreshCookie)
    }

    @Test func aWrongPresharedKeyEndsInADecryptionFailureNotKeys() throws {
        let (pending, initiation) = try InitiatorHandshake.start(local: initiator, remote: initiatorSeesResponder, senderIndex: 7)
        let consumed = try ConsumedInitiation(consuming: initiation, local: responder)
        let wrong = RemoteIdentity(publicKey: initiator.publicKey, presharedKey: .random())
        let (response, _) = try consumed.respond(remote: wrong, senderIndex: 8)
        #expect(throws: WireGuardError.decryptionFailed(field: "empty payload of the response")) {
            try pending.finish(response, local: initiator)
        }
    }

    @Test func anInitiationForSomeoneElseDoesNotOpen() throws {
        let stranger = LocalIdentity(privateKey: PrivateKey())
        let (_, initiation) = try InitiatorHandshake.start(local: initiator, remote: initiatorSeesResponder, senderIndex: 7)
        var jar = CookieJar(remote: initiatorSeesResponder)
        #expect(!MessageMACs.verifyMAC1(jar.stamp(initiation, now: now), local: stranger))
        #expect(throws: WireGuardError.decryptionFailed(field: "static key of the initiation")) {
            try ConsumedInitiation(consuming: initiation, local: stranger)
        }
    }

    @Test func aResponseToAnotherHandshakeIsNotTaken() throws {
        let (pending, initiation) = try InitiatorHandshake.start(local: initiator, remote: initiatorSeesResponder, senderIndex: 7)
        let consumed = try ConsumedInitiation(consuming: initiation, local: responder)
        var (response, _) = try consumed.respond(remote: responderSeesInitiator, senderIndex: 8)
        response.receiverIndex = 9
        #expect(throws: WireGuardError.unexpectedReceiver(9)) { try pending.finish(response, local: initiator) }
    }

    /// A low-order point as the ephemeral gives an all-zero shared secret: refused, not used.
    @Test func aLowOrderEphemeralIsRefused() throws {
        let (_, good) = try InitiatorHandshake.start(local: initiator, remote: initiatorSeesResponder, senderIndex: 7)
        var hostile = good
        hostile.ephemeral = [UInt8](repeating: 0, count: 32)
        #expect(throws: WireGuardError.weakPublicKey) { try ConsumedInitiation(consuming: hostile, local: responder) }
        hostile.ephemeral = [1] + [UInt8](repeating: 0, count: 31)
        #expect(throws: WireGuardError.weakPublicKey) { try ConsumedInitiation(consuming: hostile, local: responder) }
    }

    /// Fresh random keys, both directions, many packets of every size up to a full MTU.
    @Test func randomKeysCarryPacketsBothWays() throws {
        let a = LocalIdentity(privateKey: PrivateKey()), b = LocalIdentity(privateKey: PrivateKey())
        let (pending, initiation) = try InitiatorHandshake.start(local: a, remote: RemoteIdentity(publicKey: b.publicKey), senderIndex: 100)
        let (response, bKeys) = try ConsumedInitiation(consuming: initiation, local: b).respond(remote: RemoteIdentity(publicKey: a.publicKey), senderIndex: 200)
        var aSession = TransportSession(keys: try pending.finish(response, local: a), established: now)
        var bSession = TransportSession(keys: bKeys, established: now)
        for size in [0, 1, 15, 16, 17, 100, 1280, 1420] {
            let packet = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            for (sender, receiver) in [(0, 1), (1, 0)] {
                let sealed = sender == 0 ? try aSession.seal(packet, mtu: 1420) : try bSession.seal(packet, mtu: 1420)
                #expect(sealed.count == 32 + min((size + 15) & ~15, 1420))
                guard case .transport(_, let counter, let body) = try Message(parsing: sealed) else { Issue.record("not transport"); return }
                let opened = receiver == 1 ? try bSession.open(counter: counter, sealed: body) : try aSession.open(counter: counter, sealed: body)
                #expect(Array(opened.prefix(size)) == packet)
                #expect(opened.dropFirst(size).allSatisfy { $0 == 0 })
            }
        }
        #expect(aSession.sendingCounter == 8 && bSession.hasReceived)
    }
}
