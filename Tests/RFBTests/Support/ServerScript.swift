import FarcastSupport
@testable import RFB

/// Builds the byte stream an RFB 3.8 server would send, piece by piece.
struct ServerScript {
    var bytes: [UInt8] = []

    mutating func banner(_ text: String = "RFB 003.008\n") { bytes += Array(text.utf8) }

    /// 3.7/3.8 security list, then (for None on 3.8) an OK SecurityResult.
    mutating func securityNone38() {
        bytes += [1, 1]
        bytes += [0, 0, 0, 0]
    }

    mutating func serverInit(width: Int, height: Int, format: PixelFormat = .rgb888, name: String = "test") {
        var w = ByteWriter()
        w.writeInteger(UInt16(width))
        w.writeInteger(UInt16(height))
        format.encode(into: &w)
        w.writeInteger(UInt32(name.utf8.count))
        w.writeUTF8(name)
        bytes += w.bytes
    }

    /// The whole handshake for an unauthenticated 3.8 session.
    static func handshake(width: Int, height: Int, format: PixelFormat = .rgb888) -> ServerScript {
        var s = ServerScript()
        s.banner()
        s.securityNone38()
        s.serverInit(width: width, height: height, format: format)
        return s
    }

    mutating func updateHeader(rects: Int) {
        var w = ByteWriter()
        w.writeUInt8(0)
        w.writeUInt8(0)
        w.writeInteger(UInt16(rects))
        bytes += w.bytes
    }

    mutating func rect(_ r: RFBRect, _ encoding: RFBEncoding, _ body: [UInt8]) {
        var w = ByteWriter()
        w.writeInteger(UInt16(r.x)); w.writeInteger(UInt16(r.y)); w.writeInteger(UInt16(r.width)); w.writeInteger(UInt16(r.height))
        w.writeInteger(encoding.rawValue)
        bytes += w.bytes + body
    }

    mutating func colourMap(first: Int, colours: [UInt32]) {
        var w = ByteWriter()
        w.writeUInt8(1)
        w.writeUInt8(0)
        w.writeInteger(UInt16(first))
        w.writeInteger(UInt16(colours.count))
        for c in colours {
            for shift: UInt32 in [16, 8, 0] {
                let v = UInt16((c >> shift) & 255)
                w.writeInteger(v << 8 | v)
            }
        }
        bytes += w.bytes
    }
}

/// Runs a script through a connection, in chunks, collecting every action.
struct Harness: ~Copyable {
    var connection: RFBConnection
    var actions: [RFBConnection.Action] = []

    init(configuration: RFBConnection.Configuration = .init(), jpeg: Bool = true) {
        connection = RFBConnection(configuration: configuration, jpegDecoder: jpeg ? makeDefaultJPEGDecoder() : nil)
    }

    mutating func feed(_ bytes: [UInt8], chunk: Int = .max) {
        var i = 0
        while i < bytes.count {
            let n = min(chunk, bytes.count - i)
            actions += connection.receive(Array(bytes[i..<i + n]))
            i += n
        }
    }

    /// Feeds in random chunk sizes between 1 and `maxChunk`.
    mutating func feedRandomly(_ bytes: [UInt8], seed: UInt64, maxChunk: Int) {
        var rng = SplitMix(seed: seed)
        var i = 0
        while i < bytes.count {
            let n = min(1 + rng.below(maxChunk), bytes.count - i)
            actions += connection.receive(Array(bytes[i..<i + n]))
            i += n
        }
    }

    var events: [RFBEvent] { actions.compactMap { if case .event(let e) = $0 { return e } else { return nil } } }
    var sent: [[UInt8]] { actions.compactMap { if case .send(let b) = $0 { return b } else { return nil } } }
    var closeError: RFBError? { actions.lazy.compactMap { if case .close(let e) = $0 { return e } else { return nil } }.first }
    var updatesCompleted: Int { events.filter { if case .framebufferUpdated = $0 { return true } else { return false } }.count }

    /// Framebuffer words with the unspecified top byte cleared.
    var rgb: [UInt32] { connection.framebuffer.pixels.map { $0 & 0xFFFFFF } }
}
