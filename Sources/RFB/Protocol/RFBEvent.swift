import Crypto
import FarcastSupport
/// What the server did, as the engine reports it.
public enum RFBEvent: Sendable, Equatable {
    /// A FramebufferUpdate finished; `dirty` lists the pixel rectangles it changed. (`VNCClient`
    /// reports updates that finish in the same read from the socket as one event listing all
    /// their rectangles.)
    /// `completesFirstFrame` is true once every pixel has been received at least once.
    case framebufferUpdated(dirty: [RFBRect], completesFirstFrame: Bool)
    /// The framebuffer changed size (DesktopSize or ExtendedDesktopSize); the monitor layout
    /// is one screen covering everything when the server did not send one.
    case resized(width: Int, height: Int, screens: [RFBScreen])
    /// The server refused this client's SetDesktopSize (ExtendedDesktopSize status code).
    case resizeRefused(status: Int)
    case cursorChanged(RFBCursor)
    /// The server's pointer moved for another reason than this client's input (VMware cursor
    /// position): where its hotspot now is.
    case pointerMoved(x: Int, y: Int)
    case bell
    /// ServerCutText: the server's clipboard text.
    case serverClipboard(String)
    case desktopNameChanged(String)
    /// SetColourMapEntries arrived (colour-mapped formats only).
    case colourMapChanged(first: Int, count: Int)
    /// The server fetched the clipboard text this client offered (servers that fetch lazily
    /// do so when an application on the remote desktop pastes).
    case clipboardFetched
    /// QEMU audio from the server (asked for with `Configuration.audio`).
    case audio(RFBAudio)
    /// The server answered a fence this client sent (its payload comes back unchanged).
    case fenceResponse(payload: [UInt8])
    /// The session ended: nil when the client closed it, else why it ended. Always the last event.
    case disconnected(RFBError?)
}

/// A QEMU audio message: the stream starting, samples in the format the client asked for
/// (interleaved, little-endian), the stream stopping.
public enum RFBAudio: Sendable, Equatable {
    case began
    case samples([UInt8])
    case ended
}

/// The sample format the client asks a QEMU server to stream its audio in.
public struct RFBAudioFormat: Sendable, Equatable {
    /// QEMU's sample format codes: 0 U8, 1 S8, 2 U16, 3 S16, 4 U32, 5 S32.
    public enum Sample: UInt8, Sendable {
        case u8 = 0, s8 = 1, u16 = 2, s16 = 3, u32 = 4, s32 = 5
        public var bytes: Int { switch self { case .u8, .s8: 1; case .u16, .s16: 2; case .u32, .s32: 4 } }
    }
    public var sample: Sample
    /// 1 or 2 (QEMU's limit).
    public var channels: Int
    public var sampleRate: Int

    public init(sample: Sample = .s16, channels: Int = 2, sampleRate: Int = 48000) {
        self.sample = sample
        self.channels = channels
        self.sampleRate = sampleRate
    }
}

/// What the server told the client during the handshake.
public struct ServerInfo: Sendable, Equatable, Codable {
    /// The banner as sent, e.g. "RFB 003.008".
    public var banner: String
    /// The version both sides speak: "3.3", "3.7" or "3.8".
    public var protocolVersion: String
    /// Security types the server listed (3.7+) or chose (3.3).
    public var securityTypes: [SecurityType]
    /// VeNCrypt subtypes, when the client went through VeNCrypt.
    public var veNCryptSubtypes: [UInt32]
    /// The method that authenticated this session.
    public var security: String
    public var width: Int
    public var height: Int
    public var name: String
    /// The server's native pixel format (from ServerInit).
    public var serverPixelFormat: String
    /// The pixel format the client asked for and decodes.
    public var pixelFormat: String

    /// True when the session is encrypted by anonymous TLS (TLSNone, TLSVnc, TLSPlain, or the
    /// older TLS type 18): safe from eavesdropping, but nothing proved who the server is (a man
    /// in the middle is not detected).
    public var usesAnonymousTLS: Bool {
        SecurityMethod.allCases.first { $0.description == security }?.isAnonymousTLS ?? false
    }
}

/// A server's RSA-AES public key, to be checked against the pin for that server.
public struct ServerKeyCheck: Sendable, Equatable {
    public var method: SecurityMethod
    /// The key as sent: U32 bits, modulus, exponent.
    public var blob: [UInt8]
    /// SHA-256 of the blob, lowercase hex: what Farcast pins.
    public var fingerprint: String
    /// The form TigerVNC's viewer shows: SHA-1 of the blob, first 8 bytes in hex joined by "-".
    public var tigerVNCFingerprint: String

    public init(method: SecurityMethod, blob: [UInt8]) {
        self.method = method
        self.blob = blob
        fingerprint = hexString(SHA256.hash(data: blob))
        tigerVNCFingerprint = Insecure.SHA1.hash(data: blob).prefix(8).map { hexString([$0]) }.joined(separator: "-")
    }
}

/// Credentials the engine asks for when a security method needs them.
public struct VNCCredentials: Sendable {
    public var username: String?
    public var password: String

    public init(username: String? = nil, password: String) {
        self.username = username
        self.password = password
    }
}

/// What kind of credentials a method needs.
public struct CredentialRequest: Sendable, Equatable {
    public var method: SecurityMethod
    public var needsUsername: Bool
}
