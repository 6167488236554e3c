import FarcastSupport

/// CopyRect (1): copy a same-sized rectangle from elsewhere in the framebuffer.
enum CopyRectDecoder {
    static func decode(_ reader: inout ByteReader, rect: RFBRect, framebuffer: inout Framebuffer) throws -> Void {
        var r = reader
        let sx = Int(try r.readInteger(as: UInt16.self))
        let sy = Int(try r.readInteger(as: UInt16.self))
        reader = r
        let source = RFBRect(x: sx, y: sy, width: rect.width, height: rect.height)
        guard framebuffer.contains(source) else {
            throw RFBError.malformedRectangle(encoding: "CopyRect", detail: "source \(source) lies outside the \(framebuffer.width)×\(framebuffer.height) framebuffer")
        }
        guard !rect.isEmpty else { return }
        framebuffer.copy(from: source, toX: rect.x, toY: rect.y)
    }
}
