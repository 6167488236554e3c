import FarcastSupport
import Testing
import Tunnel
@testable import WireGuard

/// Two devices joined by an in-memory wire, on a clock the test moves: the handshake on first
/// traffic, the responder's confirmation rule, keepalives, rekeying with the old session still
/// opening packets in flight, retries and giving up, cookies under load, replay, cryptokey
/// routing and roaming — each timer rule in simulated seconds.
@Suite struct DeviceTests {
    static let aEndpoint = UDPEndpoint(address: IPAddress("127.0.0.1")!, port: 1001)
    static let bEndpoint = UDPEndpoint(address: IPAddress("127.0.0.1")!, port: 1002)

    /// Two peers, A (10.0.0.1) and B (10.0.0.2); A knows B's endpoint, B learns A's.
    struct Pair {
        var a: WireGuardDevice
        var b: WireGuardDevice
        var now = MonotonicInstant(nanoseconds: 1_000_000_000_000)
        /// Datagrams in flight: (to B?, bytes, from).
        var wire: [(toB: Bool, bytes: [UInt8], from: UDPEndpoint)] = []
        var deliveredToA: [[UInt8]] = []
        var deliveredToB: [[UInt8]] = []
        var notes: [String] = []
        var aFrom = DeviceTests.aEndpoint

        init(timers: WireGuardTimers = .standard, bLoadThreshold: Int = 1000, persistentKeepalive: Duration? = nil) {
            let aKey = PrivateKey(), bKey = PrivateKey()
            let psk = PresharedKey.random()
            a = WireGuardDevice(privateKey: aKey, peers: [PeerConfiguration(
                publicKey: bKey.publicKey, presharedKey: psk, allowedIPs: [try! IPPrefix("10.0.0.2/32")],
                endpoint: DeviceTests.bEndpoint, persistentKeepalive: persistentKeepalive)], timers: timers, now: now)
            b = WireGuardDevice(privateKey: bKey, peers: [PeerConfiguration(
                publicKey: aKey.publicKey, presharedKey: psk, allowedIPs: [try! IPPrefix("10.0.0.1/32")])],
                timers: timers, loadThreshold: bLoadThreshold, now: now)
        }

        mutating func take(_ planned: [DeviceAction], fromA: Bool) {
            let actions = fromA ? a.completingCrypto(planned, now: now) : b.completingCrypto(planned, now: now)
            for action in actions {
                switch action {
                case .send(let bytes, let to):
                    #expect(to == (fromA ? DeviceTests.bEndpoint : aFrom), "sent to \(to)")
                    wire.append((fromA, bytes, fromA ? aFrom : DeviceTests.bEndpoint))
                case .deliver(let packet):
                    if fromA { deliveredToA.append(packet) } else { deliveredToB.append(packet) }
                case .note(let text):
                    notes.append(text)
                case .seal, .open:
                    Issue.record("completingCrypto left \(action)")
                }
            }
        }

        /// Delivers everything on the wire (and what that provokes) until it is quiet.
        mutating func flush(drop: (([UInt8]) -> Bool)? = nil) {
            while !wire.isEmpty {
                let (toB, bytes, from) = wire.removeFirst()
                if drop?(bytes) == true { continue }
                if toB { take(b.datagram(bytes, from: from, now: now), fromA: false) }
                else { take(a.datagram(bytes, from: from, now: now), fromA: true) }
            }
        }

        mutating func aSends(_ packet: [UInt8]) { take(a.packetFromTunnel(packet, now: now), fromA: true) }
        mutating func bSends(_ packet: [UInt8]) { take(b.packetFromTunnel(packet, now: now), fromA: false) }

        /// Moves the clock in steps of `step`, running both devices' timers.
        mutating func wait(_ duration: Duration, step: Duration = .milliseconds(100), drop: (([UInt8]) -> Bool)? = nil) {
            let end = now.advanced(byNanoseconds: duration.wholeNanoseconds)
            while now < end {
                now = now.advanced(byNanoseconds: step.wholeNanoseconds)
                take(a.tick(now: now), fromA: true)
                take(b.tick(now: now), fromA: false)
                flush(drop: drop)
            }
        }
    }

    static func packet(from source: String, to destination: String, payload: [UInt8] = Array("data".utf8)) -> [UInt8] {
        let total = 20 + payload.count
        return [0x45, 0, UInt8(total >> 8), UInt8(total & 0xFF), 0, 0, 0, 0, 64, 17, 0, 0]
            + IPAddress(source)!.bytes + IPAddress(destination)!.bytes + payload
    }
    static let aToB = packet(from: "10.0.0.1", to: "10.0.0.2")
    static let bToA = packet(from: "10.0.0.2", to: "10.0.0.1")

    static func type(_ bytes: [UInt8]) -> UInt8 { bytes[0] }

    @Test func theFirstPacketStartsAHandshakeAndArrivesAfterIt() {
        var pair = Pair()
        pair.aSends(Self.aToB)
        #expect(pair.wire.map { Self.type($0.bytes) } == [1], "the packet waits; an initiation goes out")
        pair.flush()
        #expect(pair.deliveredToB == [Self.aToB], "delivered without the padding")
        // B answers at once: its session is confirmed by A's first data message.
        pair.bSends(Self.bToA)
        #expect(pair.wire.map { Self.type($0.bytes) } == [4])
        pair.flush()
        #expect(pair.deliveredToA == [Self.bToA])
        #expect(pair.a.status[0].lastHandshake != nil && pair.b.status[0].endpoint == DeviceTests.aEndpoint)
        #expect(pair.a.status[0].sentBytes > 0 && pair.b.status[0].receivedBytes == pair.a.status[0].sentBytes)
    }

    @Test func aResponderSendsNothingUntilTheInitiatorConfirmsAndAKeepaliveConfirms() {
        // A initiates with nothing queued (its persistent keepalive starts the handshake).
        var pair = Pair(persistentKeepalive: .seconds(25))
        pair.wait(.milliseconds(100))
        #expect(pair.a.status[0].lastHandshake != nil, "the persistent keepalive made a handshake")
        // A's keepalive after the response confirmed B's session: B can send at once.
        pair.bSends(Self.bToA)
        #expect(pair.wire.map { Self.type($0.bytes) } == [4])
        pair.flush()
        #expect(pair.deliveredToA == [Self.bToA])
    }

    @Test func dataOneWayIsAnsweredByAKeepaliveAfterTheKeepaliveTimeout() {
        var pair = Pair()
        pair.aSends(Self.aToB)
        pair.flush()
        pair.wait(.seconds(9))
        #expect(pair.b.status[0].sentBytes == 92, "only the response so far")
        pair.wait(.seconds(2))
        #expect(pair.b.status[0].sentBytes == 92 + 32, "one keepalive (32 bytes) after 10 s of receiving without sending")
    }

    @Test func theInitiatorRekeysAfterRekeyAfterTimeAndPacketsInFlightStillOpen() {
        var pair = Pair()
        pair.aSends(Self.aToB)
        pair.flush()
        let firstHandshake = pair.a.status[0].lastHandshake
        pair.wait(.seconds(121), step: .seconds(1))
        // A sends on the old session and starts a new handshake; the data message is still read.
        pair.aSends(Self.aToB)
        #expect(pair.wire.map { Self.type($0.bytes) } == [4, 1])
        let inFlight = pair.wire.removeFirst()
        pair.flush()
        #expect(pair.a.status[0].lastHandshake != firstHandshake, "a new handshake completed")
        // The old session's message arrives after the new handshake: B still opens it (previous).
        pair.take(pair.b.datagram(inFlight.bytes, from: inFlight.from, now: pair.now), fromA: false)
        #expect(pair.deliveredToB.count >= 2)
    }

    @Test func aLostResponseIsRetriedAfterRekeyTimeoutAndAbandonedAfterRekeyAttemptTime() {
        var pair = Pair()
        pair.aSends(Self.aToB)
        // Every response is lost.
        let dropResponses: ([UInt8]) -> Bool = { $0[0] == 2 }
        pair.flush(drop: dropResponses)
        pair.wait(.seconds(4), drop: dropResponses)
        #expect(pair.a.status[0].sentBytes == 148, "no retry before REKEY_TIMEOUT")
        pair.wait(.seconds(2), drop: dropResponses)
        #expect(pair.a.status[0].sentBytes == 2 * 148, "one retry after 5 s (+ up to 333 ms)")
        pair.wait(.seconds(90), step: .milliseconds(500), drop: dropResponses)
        let attempts = pair.a.status[0].sentBytes / 148
        #expect((16...19).contains(attempts), "\(attempts) initiations in 96 s")
        #expect(pair.notes.contains { $0.contains("did not complete") })
        pair.wait(.seconds(20), drop: dropResponses)
        #expect(pair.a.status[0].sentBytes / 148 == attempts, "given up: no more initiations")
        #expect(pair.deliveredToB.isEmpty, "the queued packet was dropped, never delivered")
    }

    @Test func aPresharedKeyMismatchIsSaidAndGivesNoSession() {
        var pair = Pair()
        // B's idea of the preshared key differs from A's.
        let aKey = pair.b.status[0].publicKey
        var change = UAPISetRequest()
        change.peers = [UAPISetRequest.Peer(publicKey: aKey, presharedKey: .random())]
        try? pair.b.apply(change, listenPort: 1002, now: pair.now)
        pair.aSends(Self.aToB)
        pair.flush()
        #expect(pair.deliveredToB.isEmpty && pair.a.status[0].lastHandshake == nil)
        #expect(pair.notes.contains { $0.contains("did not decrypt: the preshared keys differ") }, "\(pair.notes)")
    }

    @Test func aReplayedInitiationGetsNoResponse() {
        var pair = Pair()
        pair.aSends(Self.aToB)
        let initiation = pair.wire[0]
        pair.flush()
        let sent = pair.b.status[0].sentBytes
        pair.wait(.seconds(1))
        pair.take(pair.b.datagram(initiation.bytes, from: initiation.from, now: pair.now), fromA: false)
        #expect(pair.wire.isEmpty && pair.b.status[0].sentBytes == sent)
    }

    @Test func underLoadAnInitiationGetsACookieAndTheRetryWithMAC2IsAnswered() {
        var pair = Pair(bLoadThreshold: 0)
        pair.aSends(Self.aToB)
        pair.flush()
        #expect(pair.deliveredToB.isEmpty, "B answered with a cookie reply, not a response")
        #expect(pair.b.status[0].lastHandshake == nil)
        pair.wait(.seconds(6))
        #expect(pair.deliveredToB == [Self.aToB], "the retry carried MAC2 and went through")
    }

    @Test func packetsFromOutsideThePeersAllowedIPsAreDroppedAndUnroutedOnesNeverSent() {
        var pair = Pair()
        pair.aSends(Self.aToB)
        pair.flush()
        pair.bSends(Self.packet(from: "10.0.0.2", to: "10.0.0.1"))
        pair.flush()
        // B's configuration routes 10.0.0.1 to A; a packet claiming another source is refused at A.
        pair.take(pair.b.packetFromTunnel(Self.packet(from: "10.0.0.9", to: "10.0.0.1"), now: pair.now), fromA: false)
        pair.flush()
        #expect(pair.deliveredToA == [Self.bToA])
        #expect(pair.a.packetFromTunnel(Self.packet(from: "10.0.0.1", to: "10.0.0.77"), now: pair.now).isEmpty, "no peer has 10.0.0.77")
    }

    @Test func thePeerIsAnsweredWhereItWasLastHeardFrom() {
        var pair = Pair()
        pair.aSends(Self.aToB)
        pair.flush()
        pair.aFrom = UDPEndpoint(address: IPAddress("127.0.0.9")!, port: 4444)
        pair.aSends(Self.aToB)
        pair.flush()
        pair.bSends(Self.bToA)
        #expect(pair.wire.first?.from == DeviceTests.bEndpoint)
        #expect(pair.b.status[0].endpoint == pair.aFrom, "B follows A to its new address")
    }

    @Test func aSessionPastRejectAfterTimeIsNotUsedAndANewHandshakeIsMade() {
        var timers = WireGuardTimers.standard
        timers.rekeyAfterTime = .seconds(1000)     // no rekey on send: only the reject rule applies
        var pair = Pair(timers: timers)
        pair.aSends(Self.aToB)
        pair.flush()
        pair.now = pair.now.advanced(byNanoseconds: Duration.seconds(181).wholeNanoseconds)
        pair.aSends(Self.aToB)
        #expect(pair.wire.map { Self.type($0.bytes) } == [1], "the old session may not send: a new handshake first")
        pair.flush()
        #expect(pair.deliveredToB.count == 2)
    }

    @Test func scaledTimersRunTheSameRulesFaster() {
        var pair = Pair(timers: WireGuardTimers.standard.scaled(by: 100))
        pair.aSends(Self.aToB)
        pair.flush()
        pair.wait(.milliseconds(120), step: .milliseconds(5))
        #expect(pair.b.status[0].sentBytes == 92 + 32, "the keepalive after 100 ms instead of 10 s")
    }
}
