import FarcastSupport
@testable import Punktfunk
import Testing

struct HandshakeMessageTests {
    static let key = [UInt8](0..<16)
    static let salt: [UInt8] = [0xA1, 0xB2, 0xC3, 0xD4]

    @Test func minimalHelloIsTwentyBytes() {
        let hello = Hello(mode: StreamMode(width: 1920, height: 1080, refreshHz: 60))
        let bytes = hello.encoded()
        #expect(bytes == Array("PKF1".utf8) + [2, 0, 0, 0, 0x80, 0x07, 0, 0, 0x38, 0x04, 0, 0, 60, 0, 0, 0])
    }

    @Test func helloTailStopsAtTheLastNonDefaultFieldWithZerosBefore() throws {
        var hello = Hello(mode: StreamMode(width: 1280, height: 720, refreshHz: 60), bitrateKbps: 20000)
        #expect(hello.encoded().count == 26)
        #expect(Array(hello.encoded()[20..<26]) == [0, 0, 0x20, 0x4E, 0, 0])
        hello.name = "desk"
        #expect(hello.encoded().count == 31)
        hello.videoCaps = [.probeSequence]
        hello.codecs = [.hevc]
        let bytes = hello.encoded()
        // name, empty launch, caps, audio channels 2, codecs.
        #expect(Array(bytes[26...]) == [4] + Array("desk".utf8) + [0, 0x10, 2, 2])
        #expect(try Hello.decode(bytes) == hello)
    }

    @Test func longNamesAreCutAtSixtyFourBytesOnACharacterBoundary() throws {
        let hello = Hello(mode: StreamMode(width: 640, height: 480, refreshHz: 30), name: String(repeating: "ä", count: 40))
        let decoded = try Hello.decode(hello.encoded())
        #expect(decoded.name.utf8.count == 64)
        #expect(decoded.name == String(repeating: "ä", count: 32))
    }

    @Test func startCarriesThePortLittleEndian() throws {
        #expect(StartMessage(clientUDPPort: 0x1234).encoded() == Array("PKF1".utf8) + [0x34, 0x12])
        #expect(try StartMessage.decode(Array("PKF1".utf8) + [0x34, 0x12]).clientUDPPort == 0x1234)
    }

    static func fullWelcome() -> Welcome {
        var w = Welcome(udpPort: 47998, mode: StreamMode(width: 1920, height: 1080, refreshHz: 60), fecPercent: 20,
                        key: key, salt: salt)
        w.bitrateKbps = 20000
        w.hostCaps = 1
        return w
    }

    @Test func welcomeRoundTripsAndTheFixedHeadIsWhereTheNotesSay() throws {
        let w = Self.fullWelcome()
        let bytes = w.encoded()
        #expect(bytes.count == 68)
        #expect(Array(bytes[8..<10]) == [0x7E, 0xBB])
        #expect(bytes[22] == 1 && bytes[23] == 20)
        #expect(Array(bytes[26..<28]) == [0x80, 0x05])
        #expect(Array(bytes[29..<45]) == Self.key)
        #expect(Array(bytes[45..<49]) == Self.salt)
        #expect(try Welcome.decode(bytes) == w)
    }

    @Test func welcomeIsDecodedLengthTolerantly() throws {
        let full = Self.fullWelcome().encoded()
        // Every length from the 53-byte minimum up: read what is there, default the rest.
        for length in Welcome.minimumLength...full.count {
            let w = try Welcome.decode(Array(full.prefix(length)))
            #expect(w.key == Self.key)
            #expect(w.mode == StreamMode(width: 1920, height: 1080, refreshHz: 60))
            #expect(w.bitrateKbps == (length >= 59 ? 20000 : 0))
            #expect(w.hostCaps == (length >= 68 ? 1 : 0))
            #expect(w.codec == 2)
        }
        // A newer host's longer Welcome (unknown trailing fields) decodes too.
        var longer = full + [0]  // cipher 0
        longer += [UInt8](repeating: 0xEE, count: 32 + 40)
        #expect(try Welcome.decode(longer).cipher == .aes128GCM)
        // A cipher byte this client does not know is refused with its value.
        var unknown = full + [7]
        unknown += [UInt8](repeating: 0xEE, count: 32)
        do {
            _ = try Welcome.decode(unknown)
            Issue.record("cipher 7 was accepted")
        } catch {
            #expect("\(error)".contains("cipher 7"), "\(error)")
        }
    }

    @Test func shortOrImpossibleWelcomesAreTypedErrors() {
        let full = Self.fullWelcome().encoded()
        #expect(throws: PunktfunkSessionError.self) { try Welcome.decode(Array(full.prefix(52))) }
        #expect(throws: PunktfunkSessionError.self) { try Welcome.decode(Array("PKF0".utf8) + full.dropFirst(4)) }
        var version = full
        version[4] = 3
        #expect(throws: PunktfunkSessionError.wireVersionMismatch(ours: 2, theirs: 3)) { try Welcome.decode(version) }
        var oddShard = full
        oddShard[26] = 0x81
        #expect(throws: PunktfunkSessionError.self) { try Welcome.decode(oddShard) }
        var gf8 = full
        gf8[22] = 0
        #expect(throws: PunktfunkSessionError.self) { try Welcome.decode(gf8) }
        var clear = full
        clear[28] = 0
        #expect(throws: PunktfunkSessionError.self) { try Welcome.decode(clear) }
        var noPort = full
        noPort[8] = 0; noPort[9] = 0
        #expect(throws: PunktfunkSessionError.self) { try Welcome.decode(noPort) }
    }

    @Test func modesParse() {
        #expect(StreamMode(parsing: "1920x1080x60") == StreamMode(width: 1920, height: 1080, refreshHz: 60))
        #expect(StreamMode(parsing: "2560X1440X120")?.refreshHz == 120)
        for bad in ["", "1920x1080", "1920x1080x0", "axbxc", "99999x1080x60", "1920x1080x60x1"] {
            #expect(StreamMode(parsing: bad) == nil)
        }
    }

    @Test func welcomeCodecsAreNamed() {
        var w = Self.fullWelcome()
        for (byte, name) in [(UInt8(1), "H.264"), (2, "HEVC"), (4, "AV1"), (8, "PyroWave"), (3, "unknown codec 3")] {
            w.codec = byte
            #expect(w.codecName == name)
        }
        #expect(VideoCodec(welcomeCodec: 2) == .hevc && VideoCodec(welcomeCodec: 8) == nil)
    }
}
