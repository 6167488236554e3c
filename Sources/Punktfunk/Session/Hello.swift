import FarcastSupport

/// The display mode a session streams: width × height at a refresh rate.
public struct StreamMode: Equatable, Sendable, CustomStringConvertible {
    public var width: UInt32
    public var height: UInt32
    public var refreshHz: UInt32

    public init(width: UInt32, height: UInt32, refreshHz: UInt32) {
        self.width = width
        self.height = height
        self.refreshHz = refreshHz
    }

    /// Parses `WIDTHxHEIGHTxHZ` (e.g. `1920x1080x60`); nil when malformed or out of range.
    public init?(parsing text: String) {
        let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 3, let w = UInt32(parts[0]), let h = UInt32(parts[1]), let hz = UInt32(parts[2]),
              (16...16384).contains(w), (16...16384).contains(h), (1...1000).contains(hz) else { return nil }
        self.init(width: w, height: h, refreshHz: hz)
    }

    public var description: String { "\(width)x\(height)x\(refreshHz)" }
}

/// The client's opening message (`PKF1`, wire version 2, mode, optional tail).
///
/// Encoding writes the optional tail only as far as the last non-default field, so a minimal
/// Hello is 20 bytes and later offsets stay fixed (zeros stand in for skipped fields).
public struct Hello: Equatable, Sendable {
    /// The punktfunk/1 wire version (`WIRE_VERSION`); the host checks equality.
    public static let wireVersion: UInt32 = 2
    public static let magic: [UInt8] = Array("PKF1".utf8)

    /// Video capability bits (`video_caps`).
    public struct VideoCaps: OptionSet, Sendable, Equatable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let tenBit = VideoCaps(rawValue: 0x01)
        public static let hdr = VideoCaps(rawValue: 0x02)
        public static let yuv444 = VideoCaps(rawValue: 0x04)
        public static let hostTiming = VideoCaps(rawValue: 0x08)
        /// Ask for real speed-test results (sequence-numbered probe filler).
        public static let probeSequence = VideoCaps(rawValue: 0x10)
    }

    /// Codec bits (`video_codecs`); empty means HEVC only.
    public struct Codecs: OptionSet, Sendable, Equatable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let h264 = Codecs(rawValue: 1)
        public static let hevc = Codecs(rawValue: 2)
        public static let av1 = Codecs(rawValue: 4)
        public static let pyroWave = Codecs(rawValue: 8)
    }

    public var wireVersion: UInt32 = Hello.wireVersion
    public var mode: StreamMode
    public var compositor: UInt8 = 0
    public var gamepad: UInt8 = 0
    /// Requested bitrate; 0 = host default.
    public var bitrateKbps: UInt32 = 0
    /// Device name shown by the host (≤ 64 UTF-8 bytes).
    public var name: String = ""
    /// Launch id such as `steam:570` (≤ 128 UTF-8 bytes).
    public var launch: String = ""
    public var videoCaps: VideoCaps = []
    public var audioChannels: UInt8 = 2
    public var codecs: Codecs = []
    public var preferredCodec: UInt8 = 0

    public init(mode: StreamMode, bitrateKbps: UInt32 = 0, name: String = "", videoCaps: VideoCaps = [],
                codecs: Codecs = []) {
        self.mode = mode
        self.bitrateKbps = bitrateKbps
        self.name = name
        self.videoCaps = videoCaps
        self.codecs = codecs
    }

    /// The bytes of the Hello (the control-stream payload, without its length prefix).
    public func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.writeBytes(Self.magic)
        w.writeInteger(wireVersion, endianness: .little)
        w.writeInteger(mode.width, endianness: .little)
        w.writeInteger(mode.height, endianness: .little)
        w.writeInteger(mode.refreshHz, endianness: .little)
        let nameBytes = Array(Self.truncatedUTF8(name, max: 64))
        let launchBytes = Array(Self.truncatedUTF8(launch, max: 128))
        // How far the tail must go: the index of the last non-default field.
        let nonDefault = [compositor != 0, gamepad != 0, bitrateKbps != 0, !nameBytes.isEmpty, !launchBytes.isEmpty,
                          !videoCaps.isEmpty, audioChannels != 2, !codecs.isEmpty, preferredCodec != 0]
        guard let last = nonDefault.lastIndex(of: true) else { return w.bytes }
        let fields: [(inout ByteWriter) -> Void] = [
            { $0.writeUInt8(compositor) },
            { $0.writeUInt8(gamepad) },
            { $0.writeInteger(bitrateKbps, endianness: .little) },
            { $0.writeUInt8(UInt8(nameBytes.count)); $0.writeBytes(nameBytes) },
            { $0.writeUInt8(UInt8(launchBytes.count)); $0.writeBytes(launchBytes) },
            { $0.writeUInt8(videoCaps.rawValue) },
            { $0.writeUInt8(audioChannels) },
            { $0.writeUInt8(codecs.rawValue) },
            { $0.writeUInt8(preferredCodec) },
        ]
        for field in fields[...last] { field(&w) }
        return w.bytes
    }

    /// Decodes a Hello (used by tests and the replay tools); tolerant of a short tail.
    public static func decode(_ bytes: [UInt8]) throws(PunktfunkSessionError) -> Hello {
        var r = ByteReader(bytes)
        do {
            guard try r.readBytes(4) == magic else { throw PunktfunkSessionError.malformed("Hello does not start with PKF1") }
            let version: UInt32 = try r.readInteger(endianness: .little)
            let mode = StreamMode(width: try r.readInteger(endianness: .little), height: try r.readInteger(endianness: .little),
                                  refreshHz: try r.readInteger(endianness: .little))
            var hello = Hello(mode: mode)
            hello.wireVersion = version
            if r.isAtEnd { return hello }
            hello.compositor = try r.readUInt8()
            if r.isAtEnd { return hello }
            hello.gamepad = try r.readUInt8()
            if r.isAtEnd { return hello }
            hello.bitrateKbps = try r.readInteger(endianness: .little)
            if r.isAtEnd { return hello }
            hello.name = String(decoding: try r.readBytes(Int(try r.readUInt8())), as: UTF8.self)
            if r.isAtEnd { return hello }
            hello.launch = String(decoding: try r.readBytes(Int(try r.readUInt8())), as: UTF8.self)
            if r.isAtEnd { return hello }
            hello.videoCaps = VideoCaps(rawValue: try r.readUInt8())
            if r.isAtEnd { return hello }
            hello.audioChannels = try r.readUInt8()
            if r.isAtEnd { return hello }
            hello.codecs = Codecs(rawValue: try r.readUInt8())
            if r.isAtEnd { return hello }
            hello.preferredCodec = try r.readUInt8()
            return hello
        } catch let error as PunktfunkSessionError {
            throw error
        } catch {
            throw .malformed("Hello is truncated (\(error))")
        }
    }

    static func truncatedUTF8(_ s: String, max: Int) -> Substring.UTF8View {
        var sub = Substring(s)
        while sub.utf8.count > max { sub = sub.dropLast() }
        return sub.utf8
    }
}

/// The client's `Start`: `PKF1 ‖ client_udp_port u16 LE`, sent after binding the data socket.
public struct StartMessage: Equatable, Sendable {
    public var clientUDPPort: UInt16

    public init(clientUDPPort: UInt16) { self.clientUDPPort = clientUDPPort }

    public func encoded() -> [UInt8] {
        Hello.magic + [UInt8(clientUDPPort & 0xFF), UInt8(clientUDPPort >> 8)]
    }

    public static func decode(_ bytes: [UInt8]) throws(PunktfunkSessionError) -> StartMessage {
        guard bytes.count >= 6, Array(bytes[0..<4]) == Hello.magic else { throw .malformed("Start is not PKF1 + port") }
        return StartMessage(clientUDPPort: UInt16(bytes[4]) | UInt16(bytes[5]) << 8)
    }
}
