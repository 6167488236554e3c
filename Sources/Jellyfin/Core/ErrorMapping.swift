internal import Foundation
internal import OpenAPIRuntime

#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
import FarcastNIO
import NIOCore
import NIOHTTP1
import NIOPosix
#endif

extension JellyfinError {
    /// Turns whatever the generated client, the transport or the decoder threw into a
    /// `JellyfinError` a person can act on. `operation` names what was being done.
    static func from(_ error: any Error, operation: String, url: String, timeout: Duration) -> JellyfinError {
        if let error = error as? JellyfinError { return error }
        if let error = error as? ClientError {
            if let inner = error.underlyingError as? JellyfinError { return inner }
            if let decoding = error.underlyingError as? DecodingError {
                return .malformedResponse(operation: operation, reason: LiveMessage.reason(decoding))
            }
            if error.response != nil {
                // An answer arrived but did not fit (content type, headers, body).
                return .malformedResponse(operation: operation, reason: oneLine(error.causeDescription))
            }
            return transportError(error.underlyingError, operation: operation, url: url, timeout: timeout)
        }
        if error is DecodingError {
            return .malformedResponse(operation: operation, reason: LiveMessage.reason(error))
        }
        return transportError(error, operation: operation, url: url, timeout: timeout)
    }

    static func transportError(_ error: any Error, operation: String, url: String, timeout: Duration) -> JellyfinError {
        if let error = error as? JellyfinError { return error }
        #if canImport(AsyncHTTPClient)
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .writeTimeout:
                return .timedOut(operation: operation, seconds: Double(timeout.nanoseconds) / 1e9)
            case .connectTimeout:
                return .unreachable(url: url, reason: "connection timed out")
            case .remoteConnectionClosed:
                return .unreachable(url: url, reason: "the server closed the connection")
            case .redirectCycleDetected, .redirectLimitReached:
                return .unreachable(url: url, reason: "too many redirects")
            default:
                return .unreachable(url: url, reason: oneLine("\(error)"))
            }
        }
        if error is NIOConnectionError || error is IOError || error is SocketAddressError.UnknownHost {
            return .unreachable(url: url, reason: describeNetworkError(error))
        }
        if let error = error as? ChannelError, case .connectTimeout = error { return .unreachable(url: url, reason: "connection timed out") }
        if error is HTTPParserError {
            // The bytes that came back are not HTTP; `JellyfinServer.probe` asks what they are.
            return .notJellyfin(url: url, reason: "it does not answer in HTTP")
        }
        #endif
        return .unreachable(url: url, reason: reason(of: error))
    }

    /// Whether a transport error means the peer answered with something other than HTTP.
    static func isNotHTTP(_ error: any Error) -> Bool {
        #if canImport(AsyncHTTPClient)
        if error is HTTPParserError { return true }
        if let client = error as? ClientError { return isNotHTTP(client.underlyingError) }
        #endif
        return false
    }

    static func reason(of error: any Error) -> String {
        #if canImport(AsyncHTTPClient)
        if error is IOError || error is NIOConnectionError || error is SocketAddressError.UnknownHost { return describeNetworkError(error) }
        if let error = error as? SocketAddressError {
            if case .unknown(let host, _) = error { return "cannot resolve the host name \(host)" }
        }
        #endif
        let text = oneLine("\(error)")
        if text.localizedCaseInsensitiveContains("refused") { return "connection refused" }
        return text
    }
}

func oneLine(_ text: String) -> String {
    text.split(whereSeparator: \.isNewline).joined(separator: " ")
}
