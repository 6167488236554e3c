/// Everything that can go wrong talking to a Jellyfin server, worded for the person using the
/// program (each `description` is one line that names the cause).
public enum JellyfinError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The text given as a server address cannot be one.
    case invalidAddress(String, reason: String)
    /// No connection (refused, no route, name not found, timed out): the OS reason.
    case unreachable(url: String, reason: String)
    /// The server answered 503: it is starting (or busy); try again after `retryAfter` seconds.
    case serverStarting(url: String, retryAfter: Int?, message: String?)
    /// Something answered, but not a Jellyfin server.
    case notJellyfin(url: String, reason: String)
    /// The server refused the user name or password.
    case wrongCredentials(user: String)
    /// The token is no longer valid: signed out elsewhere, revoked, or the server was reset.
    case signedOutByServer(url: String)
    /// The server says this user may not do that.
    case forbidden(operation: String)
    case notFound(what: String)
    case quickConnectDisabled(url: String)
    /// Nobody approved the Quick Connect code in time, or the request expired.
    case quickConnectExpired(code: String)
    /// An answer that does not match the API: cut short, wrong types, not JSON.
    case malformedResponse(operation: String, reason: String)
    /// An answer larger than the configured bound (`limit` bytes).
    case responseTooLarge(operation: String, limit: Int)
    /// A status the operation does not document.
    case unexpectedStatus(operation: String, status: Int)
    case timedOut(operation: String, seconds: Double)
    case discoveryFailed(String)
    case credentialStore(String)
    case imageCache(String)
    /// The server offers no stream of this item that the player can play.
    case noPlayableStream(item: String, reason: String)
    /// The audio or subtitle stream asked for is not in the item: what it has.
    case noSuchTrack(item: String, kind: String, choice: String, available: String)
    /// The item is rated above the session's parental ceiling.
    case aboveRatingCeiling(item: String, rating: String, ceiling: String)
    /// The server understood and said no (400 to a well-formed request): why, as far as known.
    case refused(operation: String, reason: String)

    public var description: String {
        switch self {
        case .invalidAddress(let text, let reason):
            return "'\(text)' is not a server address: \(reason) (e.g. http://myserver:8096 or myserver)"
        case .unreachable(let url, let reason):
            return "cannot reach \(url): \(reason)"
        case .serverStarting(let url, let retryAfter, let message):
            let wait = retryAfter.map { "; try again in \($0) s" } ?? "; try again shortly"
            return "\(url) is starting up or busy (503\(message.map { ": \($0)" } ?? ""))\(wait)"
        case .notJellyfin(let url, let reason):
            return "\(url) does not look like a Jellyfin server: \(reason)"
        case .wrongCredentials(let user):
            return "the server rejected the user name or password for '\(user)'"
        case .signedOutByServer(let url):
            return "signed out by the server at \(url) (the access token was revoked or expired); sign in again with `farcast jellyfin login`"
        case .forbidden(let operation):
            return "the server does not allow this user to \(operation)"
        case .notFound(let what):
            return "\(what) not found on the server"
        case .quickConnectDisabled(let url):
            return "Quick Connect is turned off on \(url); an administrator can enable it in the dashboard, or sign in with a password"
        case .quickConnectExpired(let code):
            return "Quick Connect code \(code) was not approved in time; start again"
        case .malformedResponse(let operation, let reason):
            return "the server's answer to \(operation) is malformed: \(reason)"
        case .responseTooLarge(let operation, let limit):
            return "the server's answer to \(operation) is larger than \(limit / (1 << 20)) MiB; refused it"
        case .unexpectedStatus(let operation, let status):
            return "the server answered \(operation) with HTTP \(status)"
        case .timedOut(let operation, let seconds):
            return "\(operation) timed out after \(seconds.formatted0) s"
        case .discoveryFailed(let reason):
            return "discovery failed: \(reason)"
        case .noPlayableStream(let item, let reason):
            return "cannot play \(item): \(reason)"
        case .noSuchTrack(let item, let kind, let choice, let available):
            return "\(item) has no \(kind.lowercased()) stream '\(choice)' (\(available); see `farcast jellyfin info`)"
        case .refused(let operation, let reason):
            return "the server refused to \(operation): \(reason)"
        case .aboveRatingCeiling(let item, let rating, let ceiling):
            return "\(item) is rated \(rating), above the \(ceiling) ceiling (--max-rating)"
        case .credentialStore(let reason), .imageCache(let reason):
            return reason
        }
    }
}

extension Double {
    var formatted0: String { self == rounded() ? String(Int(self)) : String(self) }
}
