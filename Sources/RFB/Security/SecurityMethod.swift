/// A way to authenticate (and possibly encrypt) an RFB session, as the user ranks them.
///
/// Top-level RFB security types and VeNCrypt subtypes share one list: `x509Vnc` means "security
/// type 19, then subtype 261". The client walks the user's preference list in order and takes the
/// first method the server offers.
public enum SecurityMethod: String, CaseIterable, Sendable, CustomStringConvertible {
    /// Type 1: no authentication.
    case none
    /// Type 2: DES challenge–response with a password (at most 8 characters count).
    case vncAuth = "vncauth"
    /// VeNCrypt Plain (256): user name and password in clear text. Off by default.
    case plain
    /// VeNCrypt X509None (260): TLS with a certificate, no further authentication.
    case x509None = "x509none"
    /// VeNCrypt X509Vnc (261): TLS with a certificate, then VNC Authentication inside.
    case x509Vnc = "x509vnc"
    /// VeNCrypt X509Plain (262): TLS with a certificate, then user name and password inside.
    case x509Plain = "x509plain"
    /// VeNCrypt TLSNone/TLSVnc/TLSPlain (257–259): anonymous TLS, on OpenSSL's libssl (Linux
    /// only: BoringSSL has no anonymous cipher suites; elsewhere they are recognised only to
    /// explain why they cannot be used).
    case tlsNone = "tlsnone", tlsVnc = "tlsvnc", tlsPlain = "tlsplain"
    /// The older TLS type (18), from vino, also offered by x11vnc -ssl ("ANONTLS"): anonymous
    /// TLS at once, then the server lists security types again inside it (None or VNC
    /// Authentication). Linux only, as the VeNCrypt TLS subtypes.
    case anonTLS = "anontls"
    /// TigerVNC RSA-AES (types 129, 5): RSA key exchange, AES-EAX for the whole session; the
    /// server's RSA key is pinned on first use.
    case ra2_256 = "ra2_256", ra2 = "ra2"
    /// RSA-AES with only the login encrypted (types 130, 6).
    case ra2ne_256 = "ra2ne_256", ra2ne = "ra2ne"
    /// Apple Remote Desktop (type 30): Diffie-Hellman, user name and password (macOS).
    case appleDH = "ard"
    /// UltraVNC MS-Logon II (type 113): a 64-bit Diffie-Hellman, user name and password. Weak;
    /// never tried unless listed.
    case msLogonII = "mslogon2"
    /// TightVNC's Tight type (16): capability lists (tunnels, then authentication types), then
    /// VNC Authentication or none inside. Offers no more protection than those; used when the
    /// server offers nothing plainer, or when asked for.
    case tight

    /// Methods in the default order: certificate-protected and RSA-AES first, then anonymous TLS
    /// (encrypted, but the server unauthenticated), then Apple's and plain VNC Authentication, no
    /// authentication last. Clear-text Plain (and TLSPlain) and the weak MS-Logon II are never
    /// tried unless asked for.
    public static let defaultPreference: [SecurityMethod] = [.x509Vnc, .x509Plain, .x509None, .ra2_256, .ra2, .ra2ne_256, .ra2ne,
                                                             .tlsVnc, .tlsNone, .anonTLS, .vncAuth, .appleDH, .tight, .none].filter(implemented.contains)

    /// The methods this engine can carry out.
    /// Anonymous TLS (TLSNone, TLSVnc, TLSPlain, and type 18) runs on OpenSSL's libssl, Linux only.
    public static let implemented: Set<SecurityMethod> = {
        var methods: Set<SecurityMethod> = [.none, .vncAuth, .plain, .x509None, .x509Vnc, .x509Plain,
                                            .ra2_256, .ra2, .ra2ne_256, .ra2ne, .appleDH, .msLogonII, .tight]
        #if os(Linux)
        methods.formUnion([.tlsNone, .tlsVnc, .tlsPlain, .anonTLS])
        #endif
        return methods
    }()

    /// The anonymous-TLS methods (no certificate: encrypted, the server not authenticated).
    public var isAnonymousTLS: Bool { [.tlsNone, .tlsVnc, .tlsPlain, .anonTLS].contains(self) }

    /// The top-level security type, when this method is one.
    var topLevelType: SecurityType? {
        switch self {
        case .none: return .noAuthentication
        case .vncAuth: return .vncAuth
        case .ra2: return .ra2
        case .ra2ne: return .ra2ne
        case .appleDH: return .appleDH
        case .msLogonII: return .msLogonII
        case .tight: return .tight
        case .anonTLS: return .anonTLS
        case .ra2_256: return .ra2_256
        case .ra2ne_256: return .ra2ne_256
        default: return nil
        }
    }

    /// The VeNCrypt subtype number, when the method can travel inside VeNCrypt. Servers list
    /// plain top-level types inside VeNCrypt too (TigerVNC lists VncAuth and RA2 there), under
    /// their own numbers; those then run exactly as if chosen at the top level.
    var veNCryptSubtype: UInt32? {
        if self == .anonTLS { return nil }
        if let type = topLevelType { return UInt32(type.rawValue) }
        switch self {
        case .plain: return 256
        case .tlsNone: return 257
        case .tlsVnc: return 258
        case .tlsPlain: return 259
        case .x509None: return 260
        case .x509Vnc: return 261
        case .x509Plain: return 262
        default: return nil
        }
    }

    /// True for methods that exist only as VeNCrypt subtypes (Plain and the TLS ones).
    var onlyInsideVeNCrypt: Bool { topLevelType == nil }

    var usesTLS: Bool { [.x509None, .x509Vnc, .x509Plain, .tlsNone, .tlsVnc, .tlsPlain, .anonTLS].contains(self) }
    /// Tight and type 18 ask for a password only when their inner type is VNC Authentication.
    var needsPassword: Bool { ![.none, .x509None, .tlsNone, .tight, .anonTLS].contains(self) }
    /// RSA-AES asks for a user name only when the server wants one (its subtype says so).
    var needsUsername: Bool { [.plain, .x509Plain, .tlsPlain, .appleDH, .msLogonII].contains(self) }

    public var description: String {
        switch self {
        case .none: return "None"
        case .vncAuth: return "VncAuth"
        case .plain: return "Plain"
        case .x509None: return "X509None"
        case .x509Vnc: return "X509Vnc"
        case .x509Plain: return "X509Plain"
        case .tlsNone: return "TLSNone"
        case .tlsVnc: return "TLSVnc"
        case .tlsPlain: return "TLSPlain"
        case .ra2_256: return "RA2_256"
        case .ra2: return "RA2"
        case .ra2ne_256: return "RA2ne_256"
        case .ra2ne: return "RA2ne"
        case .appleDH: return "AppleDH"
        case .msLogonII: return "MSLogonII"
        case .tight: return "Tight"
        case .anonTLS: return "AnonTLS"
        }
    }

    /// The X509 method that gives the same authentication as an anonymous-TLS one.
    var x509Alternative: SecurityMethod? {
        switch self {
        case .tlsNone: return .x509None
        case .tlsVnc: return .x509Vnc
        case .tlsPlain: return .x509Plain
        default: return nil
        }
    }
}

/// An RFB security type as a server lists it: one byte. The numbers this client knows have
/// names (`none`, `vncAuth`, `veNCrypt`, …); any other is kept as it came, so a list reads back
/// exactly. (VeNCrypt's subtypes are 32-bit numbers of their own.)
public struct SecurityType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let invalid = SecurityType(rawValue: 0)
    /// Type 1, None (named so as not to be read as Optional's `.none`).
    public static let noAuthentication = SecurityType(rawValue: 1)
    public static let vncAuth = SecurityType(rawValue: 2)
    public static let ra2 = SecurityType(rawValue: 5)
    public static let ra2ne = SecurityType(rawValue: 6)
    public static let tight = SecurityType(rawValue: 16)
    public static let anonTLS = SecurityType(rawValue: 18)
    public static let veNCrypt = SecurityType(rawValue: 19)
    public static let sasl = SecurityType(rawValue: 20)
    public static let xvp = SecurityType(rawValue: 22)
    public static let appleDH = SecurityType(rawValue: 30)
    public static let msLogonII = SecurityType(rawValue: 113)
    public static let ra2_256 = SecurityType(rawValue: 129)
    public static let ra2ne_256 = SecurityType(rawValue: 130)

    /// For messages and `farcast vnc info`: "VeNCrypt(19)", or "type 42" for a number unknown here.
    public var description: String {
        let names: [UInt8: String] = [0: "Invalid", 1: "None", 2: "VncAuth", 5: "RA2", 6: "RA2ne", 13: "RA2", 16: "Tight", 18: "AnonTLS",
                                      19: "VeNCrypt", 20: "SASL", 22: "xvp", 30: "AppleDH", 113: "MSLogonII", 129: "RA2_256", 130: "RA2ne_256"]
        return names[rawValue].map { "\($0)(\(rawValue))" } ?? "type \(rawValue)"
    }
}

/// Names of VeNCrypt subtypes.
public func veNCryptSubtypeName(_ subtype: UInt32) -> String {
    if subtype < 256 { return SecurityType(rawValue: UInt8(subtype)).description }
    let names: [UInt32: String] = [256: "Plain", 257: "TLSNone", 258: "TLSVnc", 259: "TLSPlain", 260: "X509None",
                                   261: "X509Vnc", 262: "X509Plain", 263: "TLSSASL", 264: "X509SASL"]
    return "\(names[subtype] ?? "subtype")(\(subtype))"
}
