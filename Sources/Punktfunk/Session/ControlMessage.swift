import FarcastSupport

/// A typed control message after the handshake: `PKFc ‖ type u8 ‖ body` (little-endian).
///
/// Decoding checks each known type's exact minimum length and reads extra trailing bytes as a
/// newer peer's extension (ignored); unknown types decode as `.unknown` so the caller can skip them.
public enum ControlMessage: Equatable, Sendable {
    case reconfigure(StreamMode)
    case reconfigured(accepted: Bool, mode: StreamMode)
    case requestKeyframe
    case lossReport(lossPPM: UInt32)
    case setBitrate(kbps: UInt32)
    case bitrateChanged(kbps: UInt32)
    case rfiRequest(firstFrame: UInt32, lastFrame: UInt32)
    case pairRequest(name: String, spakeA: [UInt8])
    case pairChallenge(spakeB: [UInt8], confirmHost: [UInt8])
    case pairProof(confirmClient: [UInt8])
    case pairResult(ok: Bool)
    case probeRequest(targetKbps: UInt32, durationMs: UInt32)
    case probeResult(ProbeResult)
    case clockProbe(t1: UInt64)
    case clockEcho(t1: UInt64, t2: UInt64, t3: UInt64)
    case unknown(type: UInt8, body: [UInt8])

    public static let magic: [UInt8] = Array("PKFc".utf8)
    /// Largest RFI range a host accepts.
    public static let maxRFIRange: UInt32 = 256

    /// The host's account of a speed probe.
    public struct ProbeResult: Equatable, Sendable {
        public var bytesSent: UInt64
        public var packetsSent: UInt32
        public var durationMs: UInt32
        /// Datagrams that left the host's socket (newer hosts; nil on the 21-byte form).
        public var wirePacketsSent: UInt32?
        /// Datagrams the host's socket refused (newer hosts).
        public var sendDropped: UInt32?

        public init(bytesSent: UInt64, packetsSent: UInt32, durationMs: UInt32, wirePacketsSent: UInt32? = nil,
                    sendDropped: UInt32? = nil) {
            self.bytesSent = bytesSent
            self.packetsSent = packetsSent
            self.durationMs = durationMs
            self.wirePacketsSent = wirePacketsSent
            self.sendDropped = sendDropped
        }
    }

    /// The known message kinds by name, with their wire type bytes: the only place the numbers
    /// are written.
    public enum Kind: UInt8, Sendable, CaseIterable {
        case reconfigure = 0x01, reconfigured = 0x02, requestKeyframe = 0x03, lossReport = 0x04
        case setBitrate = 0x05, bitrateChanged = 0x06, rfiRequest = 0x07
        case pairRequest = 0x10, pairChallenge = 0x11, pairProof = 0x12, pairResult = 0x13
        case probeRequest = 0x20, probeResult = 0x21
        case clockProbe = 0x30, clockEcho = 0x31
    }

    /// This message's kind; nil for `.unknown`.
    public var kind: Kind? {
        switch self {
        case .reconfigure: return .reconfigure
        case .reconfigured: return .reconfigured
        case .requestKeyframe: return .requestKeyframe
        case .lossReport: return .lossReport
        case .setBitrate: return .setBitrate
        case .bitrateChanged: return .bitrateChanged
        case .rfiRequest: return .rfiRequest
        case .pairRequest: return .pairRequest
        case .pairChallenge: return .pairChallenge
        case .pairProof: return .pairProof
        case .pairResult: return .pairResult
        case .probeRequest: return .probeRequest
        case .probeResult: return .probeResult
        case .clockProbe: return .clockProbe
        case .clockEcho: return .clockEcho
        case .unknown: return nil
        }
    }

    /// The wire type byte.
    public var typeByte: UInt8 {
        if case .unknown(let type, _) = self { return type }
        return kind!.rawValue   // every case but .unknown has a kind
    }

    /// Whether `payload` is a control message of `kind` (without decoding its body).
    public static func payload(_ payload: [UInt8], is kind: Kind) -> Bool {
        isControl(payload) && payload[4] == kind.rawValue
    }

    /// The payload (without the stream's length prefix).
    public func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 32)
        w.writeBytes(Self.magic)
        w.writeUInt8(typeByte)
        func u32(_ v: UInt32) { w.writeInteger(v, endianness: .little) }
        func u64(_ v: UInt64) { w.writeInteger(v, endianness: .little) }
        switch self {
        case .reconfigure(let m):
            u32(m.width); u32(m.height); u32(m.refreshHz)
        case .reconfigured(let accepted, let m):
            w.writeUInt8(accepted ? 1 : 0); u32(m.width); u32(m.height); u32(m.refreshHz)
        case .requestKeyframe:
            break
        case .lossReport(let ppm):
            u32(ppm)
        case .setBitrate(let kbps), .bitrateChanged(let kbps):
            u32(kbps)
        case .rfiRequest(let first, let last):
            u32(first); u32(last)
        case .pairRequest(let name, let spakeA):
            let nameBytes = Array(Hello.truncatedUTF8(name, max: 64))
            w.writeUInt8(UInt8(nameBytes.count)); w.writeBytes(nameBytes)
            w.writeInteger(UInt16(spakeA.count), endianness: .little); w.writeBytes(spakeA)
        case .pairChallenge(let spakeB, let confirm):
            w.writeInteger(UInt16(spakeB.count), endianness: .little); w.writeBytes(spakeB); w.writeBytes(confirm)
        case .pairProof(let confirm):
            w.writeBytes(confirm)
        case .pairResult(let ok):
            w.writeUInt8(ok ? 1 : 0)
        case .probeRequest(let kbps, let ms):
            u32(kbps); u32(ms)
        case .probeResult(let p):
            u64(p.bytesSent); u32(p.packetsSent); u32(p.durationMs)
            if let wire = p.wirePacketsSent { u32(wire); u32(p.sendDropped ?? 0) }
        case .clockProbe(let t1):
            u64(t1)
        case .clockEcho(let t1, let t2, let t3):
            u64(t1); u64(t2); u64(t3)
        case .unknown(_, let body):
            w.writeBytes(body)
        }
        return w.bytes
    }

    /// True when a payload is a typed control message (starts with `PKFc` and a type byte).
    public static func isControl(_ payload: [UInt8]) -> Bool {
        payload.count >= 5 && payload[0] == 0x50 && payload[1] == 0x4B && payload[2] == 0x46 && payload[3] == 0x63
    }

    /// Decodes a payload; throws when it is not `PKFc` or a known type is too short.
    public static func decode(_ payload: [UInt8]) throws(PunktfunkSessionError) -> ControlMessage {
        guard isControl(payload) else { throw .malformed("control message does not start with PKFc and a type") }
        let type = payload[4]
        var r = ByteReader(payload, offset: 5)
        do {
            func u32() throws -> UInt32 { try r.readInteger(endianness: .little) }
            func u64() throws -> UInt64 { try r.readInteger(endianness: .little) }
            func mode() throws -> StreamMode { StreamMode(width: try u32(), height: try u32(), refreshHz: try u32()) }
            guard let kind = Kind(rawValue: type) else { return .unknown(type: type, body: Array(payload[5...])) }
            switch kind {
            case .reconfigure: return .reconfigure(try mode())
            case .reconfigured:
                let accepted = try r.readUInt8() != 0
                return .reconfigured(accepted: accepted, mode: try mode())
            case .requestKeyframe: return .requestKeyframe
            case .lossReport: return .lossReport(lossPPM: try u32())
            case .setBitrate: return .setBitrate(kbps: try u32())
            case .bitrateChanged: return .bitrateChanged(kbps: try u32())
            case .rfiRequest: return .rfiRequest(firstFrame: try u32(), lastFrame: try u32())
            case .pairRequest:
                let nameLength = Int(try r.readUInt8())
                guard nameLength <= 64 else { throw PunktfunkSessionError.malformed("pairing name of \(nameLength) bytes (limit 64)") }
                let name = String(decoding: try r.readBytes(nameLength), as: UTF8.self)
                let length = Int(try r.readInteger(as: UInt16.self, endianness: .little))
                return .pairRequest(name: name, spakeA: try r.readBytes(length))
            case .pairChallenge:
                let length = Int(try r.readInteger(as: UInt16.self, endianness: .little))
                let spakeB = try r.readBytes(length)
                return .pairChallenge(spakeB: spakeB, confirmHost: try r.readBytes(32))
            case .pairProof: return .pairProof(confirmClient: try r.readBytes(32))
            case .pairResult: return .pairResult(ok: try r.readUInt8() != 0)
            case .probeRequest: return .probeRequest(targetKbps: try u32(), durationMs: try u32())
            case .probeResult:
                var p = ProbeResult(bytesSent: try u64(), packetsSent: try u32(), durationMs: try u32())
                if r.remaining >= 8 {
                    p.wirePacketsSent = try u32()
                    p.sendDropped = try u32()
                }
                return .probeResult(p)
            case .clockProbe: return .clockProbe(t1: try u64())
            case .clockEcho: return .clockEcho(t1: try u64(), t2: try u64(), t3: try u64())
            }
        } catch let error as PunktfunkSessionError {
            throw error
        } catch {
            throw .malformed("control message 0x\(String(type, radix: 16)) is too short (\(payload.count) bytes)")
        }
    }
}
