import FarcastSupport
import Testing
@testable import WireGuard

/// Datagrams a hostile or broken sender can make: every one gets a typed error, none a crash.
@Suite struct HostileInputTests {
    typealias V = HandshakeVectors

    @Test func everyTruncationOfEveryMessageIsATypedError() {
        for message in [V.initiation, V.response, V.cookieReply] {
            for length in 0..<message.count {
                #expect(throws: WireGuardError.self) { try Message(parsing: Array(message.prefix(length))) }
            }
            #expect(throws: WireGuardError.self) { try Message(parsing: message + [0]) }
        }
        for length in 0..<Message.minimumTransportLength {
            #expect(throws: WireGuardError.self) { try Message(parsing: Array(V.initiatorTransport0.prefix(length))) }
        }
    }

    @Test func unknownTypesAndNonZeroReservedBytesAreRefused() {
        for type: UInt8 in [0, 5, 255] {
            #expect(throws: WireGuardError.self) { try Message(parsing: [type] + V.initiation.dropFirst()) }
        }
        var reserved = V.initiation
        reserved[2] = 1
        #expect(throws: WireGuardError.self) { try Message(parsing: reserved) }
    }

    /// Flipping a bit anywhere before MAC2 breaks MAC1; inside the Noise fields (ephemeral,
    /// static, timestamp) it also breaks the decryption. (The sender index is covered by MAC1
    /// only; MAC2 is read only under load.)
    @Test func everyBitFlipOfTheInitiationIsCaught() throws {
        let responder = LocalIdentity(privateKey: try PrivateKey(bytes: V.responderStatic))
        for index in 0..<(V.initiation.count - 16) {
            var altered = V.initiation
            altered[index] ^= 0x10
            guard case .initiation(let parsed)? = try? Message(parsing: altered) else { continue }   // the type bytes
            #expect(!MessageMACs.verifyMAC1(altered, local: responder), "byte \(index)")
            if (8..<116).contains(index) {
                #expect(throws: WireGuardError.self, "byte \(index)") { try ConsumedInitiation(consuming: parsed, local: responder) }
            }
        }
    }

    /// Random datagrams of random lengths with each valid type byte: parsing and opening them
    /// throws typed errors and never traps (a quick fuzz; the core has no other input).
    @Test func randomDatagramsNeverCrashTheCore() throws {
        let responder = LocalIdentity(privateKey: try PrivateKey(bytes: V.responderStatic))
        let initiator = LocalIdentity(privateKey: try PrivateKey(bytes: V.initiatorStatic))
        var generator = SystemRandomNumberGenerator()
        let (pending, _) = try InitiatorHandshake.start(local: initiator, remote: RemoteIdentity(publicKey: responder.publicKey), senderIndex: 1)
        let keys = try ConsumedInitiation(consuming: try InitiatorHandshake.start(local: initiator, remote: RemoteIdentity(publicKey: responder.publicKey), senderIndex: 2).1,
                                          local: responder).respond(remote: RemoteIdentity(publicKey: initiator.publicKey), senderIndex: 3).1
        var session = TransportSession(keys: keys, established: MonotonicInstant(nanoseconds: 0))
        var jar = CookieJar(remote: RemoteIdentity(publicKey: responder.publicKey))
        _ = jar.stamp(try InitiatorHandshake.start(local: initiator, remote: RemoteIdentity(publicKey: responder.publicKey), senderIndex: 4).1,
                      now: MonotonicInstant(nanoseconds: 0))
        var outcomes = [String: Int]()
        for round in 0..<3000 {
            let type = UInt8(round % 5)
            let length = [148, 92, 64, 32, 48, Int.random(in: 0...200, using: &generator)][round % 6]
            var datagram = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if length >= 4 { datagram.replaceSubrange(0..<4, with: [type, 0, 0, 0]) }
            do {
                switch try Message(parsing: datagram) {
                case .initiation(let m): _ = try ConsumedInitiation(consuming: m, local: responder)
                case .response(let m): _ = try pending.finish(m, local: initiator)
                case .cookieReply(let m): try jar.consume(m, now: MonotonicInstant(nanoseconds: 0))
                case .transport(_, let counter, let sealed): _ = try session.open(counter: counter, sealed: sealed)
                }
                Issue.record("random bytes were accepted: \(datagram)")
            } catch {
                outcomes[String("\(error)".prefix(30)), default: 0] += 1
            }
        }
        #expect(outcomes.values.reduce(0, +) == 3000)
        #expect(session.replay == ReplayWindow(), "no forged counter moved the window")
    }
}
