/// An RFB encoding or pseudo-encoding number (the S32 in SetEncodings and rectangle headers).
public struct RFBEncoding: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public init(_ value: Int32) { rawValue = value }

    // Pixel-data encodings.
    public static let raw = RFBEncoding(0)
    public static let copyRect = RFBEncoding(1)
    public static let rre = RFBEncoding(2)
    public static let coRRE = RFBEncoding(4)
    public static let hextile = RFBEncoding(5)
    public static let zlib = RFBEncoding(6)
    public static let tight = RFBEncoding(7)
    public static let trle = RFBEncoding(15)
    public static let zrle = RFBEncoding(16)

    // Pseudo-encodings.
    public static let desktopSize = RFBEncoding(-223)
    public static let lastRect = RFBEncoding(-224)
    public static let cursor = RFBEncoding(-239)
    public static let xCursor = RFBEncoding(-240)
    public static let desktopName = RFBEncoding(-307)
    public static let extendedDesktopSize = RFBEncoding(-308)
    public static let fence = RFBEncoding(-312)
    public static let continuousUpdates = RFBEncoding(-313)
    public static let qemuExtendedKeyEvent = RFBEncoding(-258)
    /// QEMU audio: the server streams the guest's sound once the client asks (QEMU's own server).
    public static let qemuAudio = RFBEncoding(-259)
    /// The cursor as premultiplied RGBA (TigerVNC sends it in Raw).
    public static let cursorWithAlpha = RFBEncoding(-314)
    /// Pointer buttons 8–15 in an extra byte of PointerEvent, once the server confirms.
    public static let extendedMouseButtons = RFBEncoding(-316)
    /// Where the server's pointer is when something other than this client moved it.
    public static let vmwareCursorPosition = RFBEncoding(0x574D_5666)
    public static let extendedClipboard = RFBEncoding(Int32(bitPattern: 0xC0A1_E5CE))

    /// JPEG quality level 0–9 (TigerVNC/TurboVNC mapping: 9 is best).
    public static func jpegQuality(_ level: Int) -> RFBEncoding { RFBEncoding(Int32(-32 + level)) }
    /// zlib compression level 0–9.
    public static func compressionLevel(_ level: Int) -> RFBEncoding { RFBEncoding(Int32(-256 + level)) }
    /// JPEG fine-grained quality 0–100.
    public static func jpegFineQuality(_ quality: Int) -> RFBEncoding { RFBEncoding(Int32(-512 + quality)) }
    /// JPEG chroma subsampling.
    public static func jpegSubsampling(_ s: JPEGSubsampling) -> RFBEncoding { RFBEncoding(s.pseudoEncoding) }

    /// The pixel-data encodings this engine decodes, by user-facing name.
    public static let decodable: [(name: String, encoding: RFBEncoding)] = [
        ("tight", .tight), ("zrle", .zrle), ("trle", .trle), ("hextile", .hextile), ("zlib", .zlib),
        ("corre", .coRRE), ("rre", .rre), ("copyrect", .copyRect), ("raw", .raw),
    ]

    /// Looks up a pixel-data encoding by name (case-insensitive).
    public init?(name: String) {
        guard let match = Self.decodable.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = match.encoding
    }

    /// Pixel-data encodings are the non-negative numbers, except VMware's pseudo-encodings
    /// (0x574D56xx).
    public var isPixelData: Bool { rawValue >= 0 && rawValue >> 8 != 0x57_4D56 }

    public var description: String {
        switch self {
        case .raw: return "Raw"
        case .copyRect: return "CopyRect"
        case .rre: return "RRE"
        case .coRRE: return "CoRRE"
        case .hextile: return "Hextile"
        case .zlib: return "Zlib"
        case .tight: return "Tight"
        case .trle: return "TRLE"
        case .zrle: return "ZRLE"
        case .desktopSize: return "DesktopSize"
        case .lastRect: return "LastRect"
        case .cursor: return "Cursor"
        case .xCursor: return "XCursor"
        case .cursorWithAlpha: return "CursorWithAlpha"
        case .extendedMouseButtons: return "ExtendedMouseButtons"
        case .qemuAudio: return "QEMUAudio"
        case .vmwareCursorPosition: return "VMwareCursorPosition"
        case .qemuExtendedKeyEvent: return "QEMUExtendedKeyEvent"
        case .desktopName: return "DesktopName"
        case .extendedDesktopSize: return "ExtendedDesktopSize"
        case .fence: return "Fence"
        case .continuousUpdates: return "ContinuousUpdates"
        case .extendedClipboard: return "ExtendedClipboard"
        default:
            switch rawValue {
            case -32...(-23): return "JPEGQuality\(rawValue + 32)"
            case -256...(-247): return "CompressionLevel\(rawValue + 256)"
            case -512...(-412): return "JPEGFineQuality\(rawValue + 512)"
            case -768...(-763): return "JPEGSubsampling\(rawValue + 768)"
            default: return "encoding \(rawValue)"
            }
        }
    }
}

/// JPEG chroma subsampling the client may ask a TigerVNC-compatible server for.
public enum JPEGSubsampling: String, Sendable, CaseIterable {
    case x1 = "1x", x4 = "4x", x2 = "2x", gray, x8 = "8x", x16 = "16x"

    var pseudoEncoding: Int32 {
        switch self {
        case .x1: return -768
        case .x4: return -767
        case .x2: return -766
        case .gray: return -765
        case .x8: return -764
        case .x16: return -763
        }
    }
}
