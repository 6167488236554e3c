@testable import Desktop
import Testing

/// D-Bus marshalling byte for byte (alignment counted from the message's start, array lengths
/// without their padding, variants with their signature), whole messages both ways, and hostile
/// bytes refused with a reason.
@Suite struct DBusMessageTests {
    @Test func valuesHaveTheirWireForm() {
        func bytes(_ value: DBusValue, base: Int = 0) -> [UInt8] {
            var writer = DBusWriter(base: base)
            writer.write(value)
            return writer.bytes
        }
        #expect(bytes(.string("ab")) == [2, 0, 0, 0, 97, 98, 0])
        #expect(bytes(.string("ab"), base: 1) == [0, 0, 0, 2, 0, 0, 0, 97, 98, 0], "aligned to 4 from the message's start")
        #expect(bytes(.signature("as")) == [2, 97, 115, 0])
        #expect(bytes(.boolean(true)) == [1, 0, 0, 0])
        #expect(bytes(.int64(-2)) == [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(bytes(.double(1)) == [0, 0, 0, 0, 0, 0, 0xF0, 0x3F])
        #expect(bytes(.variant(.uint32(7))) == [1, 117, 0, 0, 7, 0, 0, 0])
        // a{sv} with one entry: the length (10) counts from the first entry, after its padding.
        #expect(bytes(.properties([("k", .byte(9))])) == [10, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 107, 0, 1, 121, 0, 9])
        #expect(bytes(.array(element: .int64, [])) == [0, 0, 0, 0, 0, 0, 0, 0], "an empty array still pads to its elements")
    }

    @Test func signaturesParse() throws {
        #expect(try DBusType.parse("sa{sv}(ix)as") == [.string, .dictionary(key: .string, value: .variant), .structure([.int32, .int64]), .array(.string)])
        #expect(try DBusType.parse("").isEmpty)
        for bad in ["a", "a{vs}", "a{s}", "(", "()", "h", "a{(i)s}", String(repeating: "a", count: 40) + "i"] {
            #expect(throws: DBusError.self, "\(bad)") { try DBusType.parse(bad) }
        }
    }

    @Test func messagesRoundTrip() throws {
        var call = DBusMessage(kind: .methodCall, path: "/org/mpris/MediaPlayer2", interface: "org.freedesktop.DBus.Properties", member: "Get",
                               destination: "org.mpris.MediaPlayer2.farcast_Kitchen", body: [.string("org.mpris.MediaPlayer2.Player"), .string("Volume")])
        call.serial = 42
        call.sender = ":1.7"
        let bytes = call.encoded()
        #expect(try DBusMessage.length(of: Array(bytes.prefix(16))) == bytes.count)
        #expect(try DBusMessage.decode(bytes) == call)
        var reply = DBusMessage(kind: .methodReturn, replySerial: 42, destination: ":1.7",
                                body: [.variant(.properties([("xesam:artist", .strings(["A", "B"])), ("mpris:length", .int64(180_000_000))]))])
        reply.serial = 3
        #expect(try DBusMessage.decode(reply.encoded()) == reply)
        // The header's fixed part: little-endian, method return, no flags, version 1, body length, serial.
        let head = Array(reply.encoded().prefix(12))
        #expect(head[0...3] == [108, 2, 0, 1] && head[8...11] == [3, 0, 0, 0])
    }

    @Test func hostileBytesAreRefused() {
        var message = DBusMessage(kind: .signal, path: "/a", interface: "b.c", member: "D", body: [.string("x")])
        message.serial = 1
        let good = message.encoded()
        #expect(throws: DBusError.self) { try DBusMessage.decode(Array(good.dropLast())) }
        var badEndian = good
        badEndian[0] = 0x7A
        #expect(throws: DBusError.self) { try DBusMessage.decode(badEndian) }
        var huge = good
        huge[4...7] = [0xFF, 0xFF, 0xFF, 0x7F]
        #expect(throws: DBusError.self) { try DBusMessage.length(of: Array(huge.prefix(16))) }
        var notNul = good
        notNul[notNul.count - 1] = 65         // the body string's terminator
        #expect(throws: DBusError.self) { try DBusMessage.decode(notNul) }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<3_000 {
            var noisy = good
            for _ in 0..<3 { noisy[Int.random(in: 0..<noisy.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator) }
            _ = try? DBusMessage.decode(noisy)
        }
    }

    @Test func busAddressesName() {
        #expect(DBusConnection.socketTarget("unix:path=/run/user/1000/bus")! == ("/run/user/1000/bus", false))
        #expect(DBusConnection.socketTarget("tcp:host=x,port=1;unix:abstract=/tmp/dbus-ab%2Ccd,guid=12")! == ("/tmp/dbus-ab,cd", true))
        #expect(DBusConnection.socketTarget("tcp:host=x,port=1") == nil)
        #expect(MPRISPlayer.nameElement("Living Room 2") == "Living_Room_2")
    }
}
