import FarcastSupport
import NIOCore
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Network errors from SwiftNIO (and the libraries on it) in words a person can act on, on one
/// line, without build paths, type names or debug dumps: "connection refused", "cannot resolve
/// the host name example.lan", "address already in use". The one place every NIO-based module
/// (RFB, Sendspin, Jellyfin) turns a transport error into text.
public func describeNetworkError(_ error: any Error) -> String {
    if let connection = error as? NIOConnectionError {
        if connection.dnsAError != nil || connection.dnsAAAAError != nil {
            return "cannot resolve the host name \(connection.host)"
        }
        if let first = connection.connectionErrors.first {
            return describeNetworkError(first.error)
        }
        return "no address to connect to for \(connection.host)"
    }
    if let unknown = error as? SocketAddressError.UnknownHost {
        return "cannot resolve the host name \(unknown.host)"
    }
    if let io = error as? IOError {
        return String(cString: strerror(io.errnoCode)).lowercased()
    }
    if let channel = error as? ChannelError {
        switch channel {
        case .connectTimeout(let amount): return "no answer within \(amount.nanoseconds / 1_000_000_000) s"
        case .eof, .alreadyClosed, .ioOnClosedChannel, .outputClosed: return "the connection is closed"
        default: break
        }
    }
    if let tls = error as? NIOSSLError {
        switch tls {
        case .uncleanShutdown: return "the peer closed the connection in the middle of TLS"
        case .handshakeFailed(let reason): return "the TLS handshake failed (\(describeBoringSSL(reason)))"
        default: return "TLS error (\(tls))"
        }
    }
    if let boring = error as? BoringSSLError {
        return "the TLS handshake failed (\(describeBoringSSL(boring)))"
    }
    if let extra = error as? NIOSSLExtraError, extra == .cannotUseIPAddressInSNI {
        return "a TLS server name cannot be an IP address"
    }
    let text = String(describing: error)
    return text.split(whereSeparator: \.isNewline).joined(separator: " ")
}

/// BoringSSL's reasons in words: an alert the peer sent by its name, anything else by the
/// library's reason string (the rest of its message names source files).
private func describeBoringSSL(_ error: BoringSSLError) -> String {
    let reasons = TLSFailure.reasons(of: error).map { reason in
        reason.peerAlert.map { "the peer's alert: \($0)" } ?? reason.words
    }
    return reasons.isEmpty ? "no reason given" : reasons.joined(separator: "; ")
}

/// Why a TLS handshake failed, from the TLS library's error codes rather than its message text:
/// the alerts the peer sent among them, typed.
public struct TLSFailure: Sendable, Equatable {
    /// One entry of BoringSSL's error queue.
    public struct Reason: Sendable, Equatable {
        /// The packed code: the library in the top byte, the reason in the low 12 bits.
        public var code: UInt32
        /// The library's reason string in lower-case words ("wrong version number").
        public var words: String

        /// BoringSSL numbers "the peer sent alert N" as reason 1000 + N (SSL_AD_REASON_OFFSET).
        public var peerAlert: TLSAlert? {
            let reason = code & 0xFFF
            return code >> 24 == 16 /* ERR_LIB_SSL */ && (1000..<1256).contains(reason) ? TLSAlert(rawValue: UInt8(reason - 1000)) : nil
        }
    }

    public var reasons: [Reason]
    public var peerAlerts: [TLSAlert] { reasons.compactMap(\.peerAlert) }

    /// nil when `error` is not a TLS library failure.
    public init?(_ error: any Error) {
        let boring: BoringSSLError
        if let tls = error as? NIOSSLError, case .handshakeFailed(let inner) = tls {
            boring = inner
        } else if let inner = error as? BoringSSLError {
            boring = inner
        } else {
            return nil
        }
        reasons = Self.reasons(of: boring)
    }

    static func reasons(of error: BoringSSLError) -> [Reason] {
        switch error {
        case .sslError(let stack), .unknownError(let stack), .invalidSNIName(let stack), .failedToSetALPN(let stack):
            return stack.compactMap { Self.reason(describedAs: $0.description) }
        default:
            return []
        }
    }

    /// One queue entry from its description, "Error: CODE error:HEX:LIBRARY:FUNCTION:REASON at
    /// FILE:LINE": swift-nio-ssl keeps the numeric code private and prints it first, in decimal.
    static func reason(describedAs text: String) -> Reason? {
        guard text.hasPrefix("Error: "), let code = UInt32(text.dropFirst(7).prefix { $0.isNumber }) else { return nil }
        var words = ""
        if let fields = text.split(separator: "error:", maxSplits: 1).dropFirst().first?.split(separator: ":"), fields.count >= 4 {
            let reason = fields[3].split(separator: " ").first.map(String.init) ?? String(fields[3])
            words = reason.lowercased().split(separator: "_").joined(separator: " ")
        }
        return Reason(code: code, words: words.isEmpty ? "reason \(code & 0xFFF)" : words)
    }
}
