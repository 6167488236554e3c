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

/// BoringSSL's reason list, reduced to the reason strings (the rest names source files).
private func describeBoringSSL(_ error: BoringSSLError) -> String {
    let text = String(describing: error)
    // The description lists "[Error: N error:XXXXXXXX:SSL routines:OPENSSL_internal:REASON at FILE:LINE]".
    var reasons: [String] = []
    for part in text.split(separator: "error:").dropFirst() {
        let fields = part.split(separator: ":")
        if fields.count >= 4 {
            let reason = fields[3].split(separator: " ").first.map(String.init) ?? String(fields[3])
            var words = reason.lowercased().split(separator: "_").joined(separator: " ")
            // "TLSV1_ALERT_UNKNOWN_CA": an alert the other side sent.
            if words.hasPrefix("tlsv1 alert ") { words = "the peer's alert: " + words.dropFirst("tlsv1 alert ".count) }
            else if words.hasPrefix("sslv3 alert ") { words = "the peer's alert: " + words.dropFirst("sslv3 alert ".count) }
            reasons.append(words)
        }
    }
    return reasons.isEmpty ? "no reason given" : reasons.joined(separator: "; ")
}
