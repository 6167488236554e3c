import FarcastSupport

/// A screen (monitor) inside the framebuffer, from ExtendedDesktopSize.
public struct RFBScreen: Hashable, Sendable, Codable {
    public var id: UInt32
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
    public var flags: UInt32

    public init(id: UInt32, x: Int, y: Int, width: Int, height: Int, flags: UInt32 = 0) {
        self.id = id
        self.x = x
        self.y = y
        self.width = width
        self.height = height
        self.flags = flags
    }
}

/// Messages the client sends in the normal phase, with their wire encoding.
public enum ClientMessage: Sendable, Equatable {
    case setPixelFormat(PixelFormat)
    case setEncodings([RFBEncoding])
    case framebufferUpdateRequest(incremental: Bool, RFBRect)
    case keyEvent(down: Bool, keysym: UInt32)
    case pointerEvent(buttonMask: UInt8, x: Int, y: Int)
    /// PointerEvent with the ExtendedMouseButtons byte: `buttons` bit n is button n + 1 (1–15).
    /// Only once the server confirmed the pseudo-encoding.
    case extendedPointerEvent(buttons: UInt16, x: Int, y: Int)
    /// ISO 8859-1 text (characters outside Latin-1 must be replaced before this point).
    case clientCutText([UInt8])
    case enableContinuousUpdates(Bool, RFBRect)
    case clientFence(flags: UInt32, payload: [UInt8])
    case setDesktopSize(width: Int, height: Int, screens: [RFBScreen])
    /// QEMU extended key event: the keysym and the XT scancode of the physical key.
    case qemuKeyEvent(down: Bool, keysym: UInt32, scancode: UInt32)

    /// True for messages that act on the remote desktop (suppressed in view-only mode).
    public var isInput: Bool {
        switch self {
        case .keyEvent, .pointerEvent, .extendedPointerEvent, .clientCutText, .qemuKeyEvent, .setDesktopSize: return true
        default: return false
        }
    }

    public func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 20)
        switch self {
        case .setPixelFormat(let format):
            w.writeUInt8(0)
            w.writeZeros(3)
            format.encode(into: &w)
        case .setEncodings(let encodings):
            w.writeUInt8(2)
            w.writeZeros(1)
            w.writeInteger(UInt16(clamping: encodings.count))
            for e in encodings.prefix(Int(UInt16.max)) { w.writeInteger(e.rawValue) }
        case .framebufferUpdateRequest(let incremental, let rect):
            w.writeUInt8(3)
            w.writeUInt8(incremental ? 1 : 0)
            writeRect(&w, rect)
        case .keyEvent(let down, let keysym):
            w.writeUInt8(4)
            w.writeUInt8(down ? 1 : 0)
            w.writeZeros(2)
            w.writeInteger(keysym)
        case .pointerEvent(let mask, let x, let y):
            w.writeUInt8(5)
            w.writeUInt8(mask)
            w.writeInteger(UInt16(clamping: max(0, x)))
            w.writeInteger(UInt16(clamping: max(0, y)))
        case .extendedPointerEvent(let buttons, let x, let y):
            // Buttons 1–7 in the mask with the marker bit 0x80 set; 8–15 in the extra byte.
            w.writeUInt8(5)
            w.writeUInt8(UInt8(buttons & 0x7F) | 0x80)
            w.writeInteger(UInt16(clamping: max(0, x)))
            w.writeInteger(UInt16(clamping: max(0, y)))
            w.writeUInt8(UInt8(truncatingIfNeeded: buttons >> 7))
        case .clientCutText(let text):
            w.writeUInt8(6)
            w.writeZeros(3)
            w.writeInteger(UInt32(text.count))
            w.writeBytes(text)
        case .enableContinuousUpdates(let on, let rect):
            w.writeUInt8(150)
            w.writeUInt8(on ? 1 : 0)
            writeRect(&w, rect)
        case .clientFence(let flags, let payload):
            w.writeUInt8(248)
            w.writeZeros(3)
            w.writeInteger(flags)
            w.writeUInt8(UInt8(min(payload.count, 64)))
            w.writeBytes(payload.prefix(64))
        case .qemuKeyEvent(let down, let keysym, let scancode):
            w.writeUInt8(255)
            w.writeUInt8(0)
            w.writeInteger(UInt16(down ? 1 : 0))
            w.writeInteger(keysym)
            w.writeInteger(scancode)
        case .setDesktopSize(let width, let height, let screens):
            w.writeUInt8(251)
            w.writeZeros(1)
            w.writeInteger(UInt16(clamping: width))
            w.writeInteger(UInt16(clamping: height))
            w.writeUInt8(UInt8(clamping: screens.count))
            w.writeZeros(1)
            for s in screens.prefix(255) {
                w.writeInteger(s.id)
                w.writeInteger(UInt16(clamping: s.x))
                w.writeInteger(UInt16(clamping: s.y))
                w.writeInteger(UInt16(clamping: s.width))
                w.writeInteger(UInt16(clamping: s.height))
                w.writeInteger(s.flags)
            }
        }
        return w.bytes
    }

    private func writeRect(_ w: inout ByteWriter, _ r: RFBRect) {
        w.writeInteger(UInt16(clamping: r.x))
        w.writeInteger(UInt16(clamping: r.y))
        w.writeInteger(UInt16(clamping: r.width))
        w.writeInteger(UInt16(clamping: r.height))
    }
}
