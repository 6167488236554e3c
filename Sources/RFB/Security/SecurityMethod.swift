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
    /// VeNCrypt TLSNone/TLSVnc/TLSPlain (257–259): anonymous TLS. BoringSSL has no anonymous
    /// cipher suites, so these are recognised only to explain why they cannot be used.
    case tlsNone = "tlsnone", tlsVnc = "tlsvnc", tlsPlain = "tlsplain"

    /// Methods in the default order: certificate-protected first, plain VNC Authentication
    /// next, no authentication last. Clear-text Plain is never tried unless asked for.
    public static let defaultPreference: [SecurityMethod] = [.x509Vnc, .x509Plain, .x509None, .vncAuth, .none]

    /// The methods this engine can carry out.
    public static let implemented: Set<SecurityMethod> = [.none, .vncAuth, .plain, .x509None, .x509Vnc, .x509Plain]

    /// The top-level security type, when this method is one.
    var topLevelType: UInt8? {
        switch self {
        case .none: return 1
        case .vncAuth: return 2
        default: return nil
        }
    }

    /// The VeNCrypt subtype number, when the method travels inside VeNCrypt.
    var veNCryptSubtype: UInt32? {
        switch self {
        case .none: return 1
        case .vncAuth: return 2
        case .plain: return 256
        case .tlsNone: return 257
        case .tlsVnc: return 258
        case .tlsPlain: return 259
        case .x509None: return 260
        case .x509Vnc: return 261
        case .x509Plain: return 262
        }
    }

    var usesTLS: Bool { [.x509None, .x509Vnc, .x509Plain, .tlsNone, .tlsVnc, .tlsPlain].contains(self) }
    var needsPassword: Bool { [.vncAuth, .plain, .x509Vnc, .x509Plain, .tlsVnc, .tlsPlain].contains(self) }
    var needsUsername: Bool { [.plain, .x509Plain, .tlsPlain].contains(self) }

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

/// Names of RFB security types for messages and `farcast vnc info`.
public func securityTypeName(_ type: UInt8) -> String {
    switch type {
    case 0: return "Invalid(0)"
    case 1: return "None(1)"
    case 2: return "VncAuth(2)"
    case 5: return "RA2(5)"
    case 6: return "RA2ne(6)"
    case 13: return "RA2(13)"
    case 16: return "Tight(16)"
    case 18: return "TLS(18)"
    case 19: return "VeNCrypt(19)"
    case 20: return "SASL(20)"
    case 22: return "xvp(22)"
    case 30: return "AppleDH(30)"
    case 113: return "MSLogonII(113)"
    case 129: return "RA2_256(129)"
    case 130: return "RA2ne_256(130)"
    default: return "type \(type)"
    }
}

/// Names of VeNCrypt subtypes.
public func veNCryptSubtypeName(_ subtype: UInt32) -> String {
    if subtype < 256 { return securityTypeName(UInt8(subtype)) }
    let names: [UInt32: String] = [256: "Plain", 257: "TLSNone", 258: "TLSVnc", 259: "TLSPlain", 260: "X509None",
                                   261: "X509Vnc", 262: "X509Plain", 263: "TLSSASL", 264: "X509SASL"]
    return "\(names[subtype] ?? "subtype")(\(subtype))"
}
