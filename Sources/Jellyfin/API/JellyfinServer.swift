import FarcastSupport
internal import Foundation
internal import OpenAPIRuntime
import HTTPTypes

/// One Jellyfin server as seen before signing in: its normalised address and this program's
/// identity. Probing follows redirects and returns the server at its final address; signing in
/// (by password or Quick Connect) returns a `JellyfinSession`.
public struct JellyfinServer: Sendable {
    public let address: ServerAddress
    public let identity: ClientIdentity
    public let transport: JellyfinTransport

    public init(address: ServerAddress, identity: ClientIdentity, transport: JellyfinTransport = JellyfinTransport()) {
        self.address = address
        self.identity = identity
        self.transport = transport
    }

    /// The generated client, speaking for `token` (nil before sign-in).
    func client(token: String?) -> Client {
        Client(serverURL: address.url, configuration: Configuration(dateTranscoder: JellyfinDateTranscoder()),
               transport: transport.clientTransport,
               middlewares: [AuthorizationMiddleware(identity: identity, token: token, serverURL: address.description),
                             ResponseLimitMiddleware(maxBytes: transport.maxResponseBytes)])
    }

    /// A GET the generated client does not make, through the same middlewares (authorization,
    /// response bound) and transport: `path` under the server's base URL, `query` as form
    /// fields (a list repeats its name, as the generated code's `explode` does).
    func send(path: String, query: [(String, String)], token: String?, operationID: String) async throws -> (HTTPResponse, HTTPBody?) {
        let encoded = query.map { Self.formEncode($0.0) + "=" + Self.formEncode($0.1) }.joined(separator: "&")
        var request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: encoded.isEmpty ? path : path + "?" + encoded)
        request.headerFields[.accept] = "application/json"
        let network = transport.clientTransport
        let limit = ResponseLimitMiddleware(maxBytes: transport.maxResponseBytes)
        let authorization = AuthorizationMiddleware(identity: identity, token: token, serverURL: address.description)
        return try await authorization.intercept(request, body: nil, baseURL: address.url, operationID: operationID) { request, body, url in
            try await limit.intercept(request, body: body, baseURL: url, operationID: operationID) { request, body, url in
                try await network.send(request, body: body, baseURL: url, operationID: operationID)
            }
        }
    }

    private static let formSafe: CharacterSet = {
        var set = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        set.insert(charactersIn: "-._~")
        return set
    }()

    private static func formEncode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: formSafe) ?? text
    }

    /// Runs one generated operation, turning whatever it throws into a `JellyfinError`.
    func perform<T>(_ operation: String, _ body: () async throws -> T) async throws(JellyfinError) -> T {
        do {
            return try await body()
        } catch {
            throw JellyfinError.from(error, operation: operation, url: address.description, timeout: transport.timeout)
        }
    }

    /// The error for an answer the operation did not expect.
    func unexpected(_ operation: String, status: Int, retryAfter: Int32? = nil, message: String? = nil) -> JellyfinError {
        switch status {
        case 401: return .signedOutByServer(url: address.description)
        case 403: return .forbidden(operation: operation)
        case 404: return .notFound(what: operation)
        case 503: return .serverStarting(url: address.description, retryAfter: retryAfter.map(Int.init), message: message)
        default: return .unexpectedStatus(operation: operation, status: status)
        }
    }

    /// Asks `/System/Info/Public` (no sign-in needed), following redirects. Returns the server
    /// at the address the redirects ended at (its base path included) and what it says of itself.
    /// A 503 (the server is starting) and an answer that is not Jellyfin's are typed errors.
    public func probe() async throws(JellyfinError) -> (server: JellyfinServer, info: ServerInfo) {
        let url = address.url.appendingPathComponent("System/Info/Public")
        let response = try await getOrNameTheGreeter(url, headers: ["Accept": "application/json",
                                                                    "Authorization": AuthorizationHeader.value(identity: identity, token: nil)])
        if response.status == 503 {
            throw .serverStarting(url: address.description, retryAfter: response.headers["retry-after"].flatMap { Int($0) },
                                  message: response.headers["message"])
        }
        guard response.status == 200 else {
            throw .notJellyfin(url: address.description, reason: "/System/Info/Public answered HTTP \(response.status)")
        }
        let dto: Components.Schemas.PublicSystemInfo
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .custom { try JellyfinDateTranscoder().decode($0.singleValueContainer().decode(String.self)) }
            dto = try decoder.decode(Components.Schemas.PublicSystemInfo.self, from: Data(response.body))
        } catch {
            throw .notJellyfin(url: address.description, reason: "/System/Info/Public is not Jellyfin's JSON (\(LiveMessage.reason(error)))")
        }
        guard let id = dto.id, !id.isEmpty, let version = dto.version else {
            throw .notJellyfin(url: address.description, reason: "/System/Info/Public has no server id or version")
        }
        // Where the redirects ended, less the path we asked for, is the server's base.
        var final = address
        let path = response.finalURL.path
        if let range = path.range(of: "/System/Info/Public", options: [.caseInsensitive, .backwards]) {
            var components = URLComponents(url: response.finalURL, resolvingAgainstBaseURL: false)
            components?.path = String(path[..<range.lowerBound])
            components?.query = nil
            if let rebuilt = components?.url, let moved = try? ServerAddress(url: rebuilt) { final = moved }
        }
        let info = ServerInfo(id: id, name: dto.serverName ?? "Jellyfin", version: version, productName: dto.productName,
                              localAddress: dto.localAddress, operatingSystem: dto.operatingSystem, startupWizardCompleted: dto.startupWizardCompleted)
        return (JellyfinServer(address: final, identity: identity, transport: transport), info)
    }

    /// The probe's GET, raced (on Linux) against what the server says unasked. An HTTP server
    /// waits for the request; an SSH or VNC server greets first, and its greeting ends the probe
    /// at once with a sentence naming it. Without the race a greeting that reaches the HTTP
    /// client before its request is on the wire can be dropped, and the GET then waits its whole
    /// timeout for an answer that never comes (CI saw 30 s against a silent VNC greeter). When
    /// the GET fails because the answer was not HTTP, the greeting names what answered.
    private func getOrNameTheGreeter(_ url: URL, headers: [String: String]) async throws(JellyfinError) -> JellyfinTransport.PlainResponse {
        #if canImport(AsyncHTTPClient)
        enum Outcome: Sendable {
            case answer(Result<JellyfinTransport.PlainResponse, any Error>)
            case greeting([UInt8])
        }
        let transport = transport, address = address
        let result = await withTaskGroup(of: Outcome.self) { group -> Result<JellyfinTransport.PlainResponse, JellyfinError> in
            group.addTask {
                do { return .answer(.success(try await transport.get(url, headers: headers))) } catch { return .answer(.failure(error)) }
            }
            group.addTask { .greeting(await transport.greeting(host: address.host, port: address.port)) }
            var greeting: [UInt8]?
            var notHTTP = false
            while let outcome = await group.next() {
                switch outcome {
                case .answer(.success(let response)):
                    group.cancelAll()
                    return .success(response)
                case .answer(.failure(let error)):
                    guard JellyfinError.isNotHTTP(error) else {
                        group.cancelAll()
                        return .failure(.transportError(error, operation: "GET /System/Info/Public", url: address.description, timeout: transport.timeout))
                    }
                    guard let greeting else { notHTTP = true; continue }   // the greeting will say what it is
                    return .failure(Self.notHTTP(address, greeting: greeting))
                case .greeting(let bytes):
                    if notHTTP || (!bytes.isEmpty && !bytes.starts(with: Array("HTTP/".utf8))) {
                        group.cancelAll()
                        return .failure(Self.notHTTP(address, greeting: bytes))
                    }
                    greeting = bytes
                }
            }
            return .failure(Self.notHTTP(address, greeting: greeting ?? []))   // not reached: the GET always ends
        }
        return try result.get()
        #else
        do {
            return try await transport.get(url, headers: headers)
        } catch {
            if JellyfinError.isNotHTTP(error) { throw Self.notHTTP(address, greeting: []) }
            throw JellyfinError.transportError(error, operation: "GET /System/Info/Public", url: address.description, timeout: transport.timeout)
        }
        #endif
    }

    /// What to say of a server that answered with something other than HTTP: what it greets
    /// with when it speaks first (SSH, VNC), as `farcast vnc info` names a wrong port.
    private static func notHTTP(_ address: ServerAddress, greeting: [UInt8]) -> JellyfinError {
        if let what = ForeignGreeting.describe(greeting) {
            return .notJellyfin(url: address.description, reason: "that is not an HTTP server; it is \(what)")
        }
        return .notJellyfin(url: address.description, reason: "that is not an HTTP server (its answer was not HTTP)")
    }

    /// The users the server shows on its sign-in screen (may be empty: servers can hide them).
    public func publicUsers() async throws(JellyfinError) -> [UserSummary] {
        let operation = "list users"
        let output = try await perform(operation) { try await client(token: nil).getPublicUsers() }
        switch output {
        case .ok(let ok): return try await perform(operation) { try ok.body.json }.map(UserSummary.init)
        case .serviceUnavailable(let s): throw unexpected(operation, status: 503, retryAfter: s.headers.retryAfter, message: s.headers.message)
        case .undocumented(let status, _): throw unexpected(operation, status: status)
        }
    }

    /// Signs in by name and password.
    public func signIn(userName: String, password: String) async throws(JellyfinError) -> JellyfinSession {
        let operation = "sign in"
        let output = try await perform(operation) {
            try await client(token: nil).authenticateUserByName(body: .json(.init(value1: .init(pw: password, username: userName))))
        }
        switch output {
        case .ok(let ok): return try session(from: try await perform(operation) { try ok.body.json }, operation: operation)
        case .serviceUnavailable(let s): throw unexpected(operation, status: 503, retryAfter: s.headers.retryAfter, message: s.headers.message)
        case .undocumented(let status, _):
            if status == 401 || status == 400 { throw .wrongCredentials(user: userName) }
            throw unexpected(operation, status: status)
        }
    }

    private func session(from result: Components.Schemas.AuthenticationResult, operation: String) throws(JellyfinError) -> JellyfinSession {
        guard let token = result.accessToken, !token.isEmpty, let user = result.user?.value1, let userId = user.id else {
            throw .malformedResponse(operation: operation, reason: "no access token or user in the answer")
        }
        return JellyfinSession(server: self, userId: userId, userName: user.name ?? "", accessToken: token, serverId: result.serverId ?? user.serverId)
    }

    /// Resumes a session from a remembered token (nothing is sent until it is used).
    /// A session for a user already signed in; `ratingCeiling` hides what is rated above it.
    public func session(userId: String, userName: String, accessToken: String, serverId: String?,
                        ratingCeiling: RatingCeiling? = nil) -> JellyfinSession {
        JellyfinSession(server: self, userId: userId, userName: userName, accessToken: accessToken, serverId: serverId, ratingCeiling: ratingCeiling)
    }

    // MARK: Quick Connect

    public func isQuickConnectEnabled() async throws(JellyfinError) -> Bool {
        let operation = "check Quick Connect"
        let output = try await perform(operation) { try await client(token: nil).getQuickConnectEnabled() }
        switch output {
        case .ok(let ok): return try await perform(operation) { try ok.body.json }
        case .serviceUnavailable(let s): throw unexpected(operation, status: 503, retryAfter: s.headers.retryAfter, message: s.headers.message)
        case .undocumented(let status, _): throw unexpected(operation, status: status)
        }
    }

    /// Starts a request: show `code` to the person; they approve it on a signed-in device.
    public func initiateQuickConnect() async throws(JellyfinError) -> QuickConnectRequest {
        let operation = "start Quick Connect"
        let output = try await perform(operation) { try await client(token: nil).initiateQuickConnect() }
        switch output {
        case .ok(let ok):
            let result = try await perform(operation) { try ok.body.json }
            guard let code = result.code, let secret = result.secret else {
                throw .malformedResponse(operation: operation, reason: "no code or secret")
            }
            return QuickConnectRequest(code: code, secret: secret, authenticated: result.authenticated ?? false)
        case .unauthorized: throw .quickConnectDisabled(url: address.description)
        case .serviceUnavailable(let s): throw unexpected(operation, status: 503, retryAfter: s.headers.retryAfter, message: s.headers.message)
        case .undocumented(let status, _): throw unexpected(operation, status: status)
        }
    }

    /// Whether the request has been approved (false while waiting). An unknown or expired
    /// secret is `quickConnectExpired`.
    public func isQuickConnectApproved(_ request: QuickConnectRequest) async throws(JellyfinError) -> Bool {
        let operation = "check the Quick Connect request"
        let output = try await perform(operation) { try await client(token: nil).getQuickConnectState(query: .init(secret: request.secret)) }
        switch output {
        case .ok(let ok): return try await perform(operation) { try ok.body.json }.authenticated ?? false
        case .notFound: throw .quickConnectExpired(code: request.code)
        case .serviceUnavailable(let s): throw unexpected(operation, status: 503, retryAfter: s.headers.retryAfter, message: s.headers.message)
        case .undocumented(let status, _): throw unexpected(operation, status: status)
        }
    }

    /// Exchanges an approved request for a session.
    public func completeQuickConnect(_ request: QuickConnectRequest) async throws(JellyfinError) -> JellyfinSession {
        let operation = "sign in with Quick Connect"
        let output = try await perform(operation) {
            try await client(token: nil).authenticateWithQuickConnect(body: .json(.init(value1: .init(secret: request.secret))))
        }
        switch output {
        case .ok(let ok): return try session(from: try await perform(operation) { try ok.body.json }, operation: operation)
        case .badRequest: throw .quickConnectExpired(code: request.code)
        case .serviceUnavailable(let s): throw unexpected(operation, status: 503, retryAfter: s.headers.retryAfter, message: s.headers.message)
        case .undocumented(let status, _):
            if status == 401 || status == 404 { throw .quickConnectExpired(code: request.code) }
            throw unexpected(operation, status: status)
        }
    }

    /// The whole Quick Connect flow: checks it is enabled, initiates, hands the code to
    /// `showCode`, polls every `pollInterval` until approved (or `timeout`), and signs in.
    public func signInWithQuickConnect(timeout: Duration = .seconds(600), pollInterval: Duration = .seconds(5),
                                       showCode: @Sendable (String) -> Void) async throws(JellyfinError) -> JellyfinSession {
        guard try await isQuickConnectEnabled() else { throw .quickConnectDisabled(url: address.description) }
        let request = try await initiateQuickConnect()
        showCode(request.code)
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            if try await isQuickConnectApproved(request) { break }
            guard clock.now.advanced(by: pollInterval) < deadline else { throw .quickConnectExpired(code: request.code) }
            do { try await Task.sleep(for: pollInterval) } catch { throw .quickConnectExpired(code: request.code) }
        }
        return try await completeQuickConnect(request)
    }
}
