import FarcastSupport
import Foundation
import Logging
import NIOCore
import NIOSSH
import Synchronization

/// What an SSH tunnel may ask the person at the keyboard. Each is optional: a missing one means
/// "cannot ask" (a script, a test), and the tunnel then fails with an error that says what was
/// needed. The library never touches a terminal itself.
public struct SSHPrompts: Sendable {
    /// The host is not in known_hosts: show the fingerprint, return true to accept (and record) it.
    public var confirmHostKey: (@Sendable (_ host: String, _ keyType: String, _ fingerprint: String) async -> Bool)?
    /// The passphrase of an encrypted key file, or nil to skip that key.
    public var passphrase: (@Sendable (_ keyPath: String) async -> String?)?
    /// The password for user@host, or nil to give up on passwords. `attempt` counts from 1.
    public var password: (@Sendable (_ user: String, _ host: String, _ attempt: Int) async -> String?)?

    public init(confirmHostKey: (@Sendable (String, String, String) async -> Bool)? = nil,
                passphrase: (@Sendable (String) async -> String?)? = nil,
                password: (@Sendable (String, String, Int) async -> String?)? = nil) {
        self.confirmHostKey = confirmHostKey
        self.passphrase = passphrase
        self.password = password
    }
}

/// The first specific reason a connection attempt failed, shared by the delegates (which know
/// why) and the code waiting for the handshake (which only sees the channel close).
final class SSHFailureRecord: Sendable {
    private let state = Mutex<(failure: SSHTunnelError?, prompting: Int)>((nil, 0))
    private let firstBytes = Mutex<[UInt8]>([])

    /// Keeps the first bytes the server sent (up to 64), to name what answered when it was not SSH.
    func heard(_ bytes: some Collection<UInt8>) {
        firstBytes.withLock { if $0.count < 64 { $0 += bytes.prefix(64 - $0.count) } }
    }

    /// What the server greeted with, when that was not an SSH banner ("a VNC server (it greeted
    /// with …)"); nil when it spoke SSH or said nothing.
    var foreignGreeting: String? {
        let bytes = firstBytes.withLock { $0 }
        guard !bytes.starts(with: Array("SSH-".utf8)) else { return nil }
        return ForeignGreeting.describe(bytes)
    }

    func record(_ failure: SSHTunnelError) {
        state.withLock { if $0.failure == nil { $0.failure = failure } }
    }

    var failure: SSHTunnelError? { state.withLock { $0.failure } }

    /// True while a prompt waits for the person: the handshake timeout does not count that time.
    var isPrompting: Bool { state.withLock { $0.prompting > 0 } }

    func prompting<T>(_ body: () async -> T) async -> T {
        state.withLock { $0.prompting += 1 }
        defer { state.withLock { $0.prompting -= 1 } }
        return await body()
    }
}

/// Checks the server's host key against known_hosts: known keys pass, revoked and changed keys
/// are refused, unknown keys are accepted only with `acceptNew` or the person's yes, and then
/// recorded (hashed) in the file.
final class KnownHostsVerifier: NIOSSHClientServerAuthenticationDelegate, Sendable {
    let host: String
    let port: Int
    let knownHostsPath: String
    let acceptNew: Bool
    let prompts: SSHPrompts
    let failures: SSHFailureRecord
    let logger: Logger

    init(host: String, port: Int, knownHostsPath: String, acceptNew: Bool, prompts: SSHPrompts, failures: SSHFailureRecord, logger: Logger) {
        self.host = host
        self.port = port
        self.knownHostsPath = knownHostsPath
        self.acceptNew = acceptNew
        self.prompts = prompts
        self.failures = failures
        self.logger = logger
    }

    func validateHostKey(hostKey: NIOSSHPublicKey, validationCompletePromise: EventLoopPromise<Void>) {
        let blob = SSHFingerprint.blob(of: hostKey)
        let fingerprint = SSHFingerprint.sha256(blob)
        let keyType = SSHFingerprint.typeName(ofBlob: blob)
        let name = KnownHosts.hostKey(host: host, port: port)
        let file: KnownHosts
        do {
            file = try KnownHosts(path: knownHostsPath)
        } catch {
            fail(.connectionLost(host: name, reason: "cannot read \(knownHostsPath): \(error.localizedDescription)"), validationCompletePromise)
            return
        }
        switch file.verdict(host: host, port: port, keyBlob: blob) {
        case .known(let line):
            logger.debug("SSH host key matches known_hosts", metadata: ["host": "\(name)", "line": "\(line)", "fingerprint": "\(fingerprint)"])
            validationCompletePromise.succeed()
        case .revoked(let line):
            fail(.hostKeyRevoked(host: name, keyType: keyType, fingerprint: fingerprint, knownHosts: knownHostsPath, line: line), validationCompletePromise)
        case .changed(let lines, _):
            fail(.hostKeyChanged(host: name, keyType: keyType, fingerprint: fingerprint, knownHosts: knownHostsPath, lines: lines), validationCompletePromise)
        case .unknown:
            let unknown = SSHTunnelError.hostKeyUnknown(host: name, keyType: keyType, fingerprint: fingerprint, knownHosts: knownHostsPath)
            if acceptNew {
                record(blob: blob, fingerprint: fingerprint, promise: validationCompletePromise)
                return
            }
            guard let confirm = prompts.confirmHostKey else {
                fail(unknown, validationCompletePromise)
                return
            }
            let failures = failures
            validationCompletePromise.completeWithTask { [self] in
                let accepted = await failures.prompting { await confirm(name, keyType, fingerprint) }
                guard accepted else {
                    failures.record(unknown)
                    throw unknown
                }
                try self.add(blob: blob, fingerprint: fingerprint)
            }
        }
    }

    private func record(blob: [UInt8], fingerprint: String, promise: EventLoopPromise<Void>) {
        do {
            try add(blob: blob, fingerprint: fingerprint)
            promise.succeed()
        } catch {
            fail(.connectionLost(host: host, reason: "cannot add the host key to \(knownHostsPath): \(error.localizedDescription)"), promise)
        }
    }

    private func add(blob: [UInt8], fingerprint: String) throws {
        var file = try KnownHosts(path: knownHostsPath)
        try file.add(host: host, port: port, keyBlob: blob)
        logger.notice("added the SSH host key of \(KnownHosts.hostKey(host: host, port: port)) to \(knownHostsPath)", metadata: ["fingerprint": "\(fingerprint)"])
    }

    private func fail(_ error: SSHTunnelError, _ promise: EventLoopPromise<Void>) {
        failures.record(error)
        promise.fail(error)
    }
}

/// Offers, in OpenSSH's order: each usable key (identity files, then the defaults), then the
/// password (from the prompt provider, up to three times). Records what the server accepts and
/// what was tried, so a failure can say both.
final class TunnelUserAuthenticator: NIOSSHClientUserAuthenticationDelegate, Sendable {
    struct State {
        var keyFiles: [String]
        var explicitFiles: Set<String>
        var passwordAttempts = 0
        /// swift-nio-ssh's first call passes every method as a guess; later ones carry the
        /// server's list from its USERAUTH_FAILURE.
        var heardFromServer = false
        var firstCall = true
        var offered: [String] = []
        var tried: [String] = []
        var notes: [String] = []
    }

    let user: String
    let host: String
    let prompts: SSHPrompts
    let failures: SSHFailureRecord
    let logger: Logger
    private let state: Mutex<State>

    init(user: String, host: String, keyFiles: [String], explicitFiles: Set<String>, prompts: SSHPrompts, failures: SSHFailureRecord, logger: Logger) {
        self.user = user
        self.host = host
        self.prompts = prompts
        self.failures = failures
        self.logger = logger
        state = Mutex(State(keyFiles: keyFiles, explicitFiles: explicitFiles))
    }

    func nextAuthenticationType(availableMethods: NIOSSHAvailableUserAuthenticationMethods,
                                nextChallengePromise: EventLoopPromise<NIOSSHUserAuthenticationOffer?>) {
        var names: [String] = []
        if availableMethods.contains(.publicKey) { names.append("publickey") }
        if availableMethods.contains(.password) { names.append("password") }
        if availableMethods.contains(.hostBased) { names.append("hostbased") }
        let fromServer = state.withLock { state -> Bool in
            if !state.firstCall { state.heardFromServer = true }
            state.firstCall = false
            if state.heardFromServer { state.offered = names }
            return state.heardFromServer
        }
        nextChallengePromise.completeWithTask { [self] in
            try await self.nextOffer(availableMethods, fromServer: fromServer)
        }
    }

    private func nextOffer(_ methods: NIOSSHAvailableUserAuthenticationMethods, fromServer: Bool) async throws -> NIOSSHUserAuthenticationOffer? {
        if methods.contains(.publicKey) {
            while let path = state.withLock({ $0.keyFiles.isEmpty ? nil : $0.keyFiles.removeFirst() }) {
                guard let key = await load(path) else { continue }
                guard let nioKey = key.nioKey else {
                    state.withLock { $0.notes.append("\(path) is an \(key.kind.displayName) key, which swift-nio-ssh 0.15 cannot sign with") }
                    continue
                }
                state.withLock { $0.tried.append("publickey \(path) (\(key.kind.displayName) \(key.fingerprint))") }
                logger.debug("offering SSH key", metadata: ["path": "\(path)", "fingerprint": "\(key.fingerprint)"])
                return NIOSSHUserAuthenticationOffer(username: user, serviceName: "", offer: .privateKey(.init(privateKey: nioKey)))
            }
        }
        // Before the server has said what it accepts, ask it with the "none" method (as OpenSSH
        // does) instead of prompting for a password it may not take.
        guard fromServer else {
            return NIOSSHUserAuthenticationOffer(username: user, serviceName: "", offer: .none)
        }
        if methods.contains(.password), let ask = prompts.password {
            let attempt = state.withLock { state -> Int in
                state.passwordAttempts += 1
                return state.passwordAttempts
            }
            if attempt <= 3, let password = await failures.prompting({ await ask(user, host, attempt) }) {
                state.withLock { if !$0.tried.contains("password") { $0.tried.append("password") } }
                return NIOSSHUserAuthenticationOffer(username: user, serviceName: "", offer: .password(.init(password: password)))
            }
        } else if methods.contains(.password) {
            state.withLock { $0.notes.append("no password source (use --ssh-password-file or FARCAST_SSH_PASSWORD, or run on a terminal)") }
        }
        let failure = state.withLock { state in
            SSHTunnelError.authenticationFailed(user: user, host: host, offered: state.offered, tried: state.tried,
                                                notes: state.notes + Self.unusableKeyNotes(besides: state.explicitFiles))
        }
        failures.record(failure)
        throw failure
    }

    /// What the person has that swift-nio-ssh 0.15 cannot use, so a failure names it instead
    /// of saying there was nothing to offer: OpenSSH's default RSA and DSA key files, and an
    /// ssh-agent (SSH_AUTH_SOCK).
    static func unusableKeyNotes(besides explicit: Set<String>, environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        var notes: [String] = []
        for (file, kind) in [("id_rsa", "an RSA key"), ("id_dsa", "a DSA key")] {
            let path = SSHPaths.home + "/.ssh/" + file
            if !explicit.contains(path), FileManager.default.fileExists(atPath: path) {
                notes.append("\(path) is \(kind), which swift-nio-ssh 0.15 cannot sign with")
            }
        }
        if let agent = environment["SSH_AUTH_SOCK"], !agent.isEmpty {
            notes.append("keys held by ssh-agent (SSH_AUTH_SOCK) cannot be used: swift-nio-ssh 0.15 cannot sign through an agent")
        }
        return notes
    }

    /// Reads a key file, asking for its passphrase when it has one. A missing default file is
    /// silently skipped; a missing or unusable explicit one becomes a note in the failure.
    private func load(_ path: String) async -> SSHPrivateKey? {
        let explicit = state.withLock { $0.explicitFiles.contains(path) }
        guard let data = FileManager.default.contents(atPath: path) else {
            if explicit { state.withLock { $0.notes.append("\(path) cannot be read") } }
            return nil
        }
        let text = String(decoding: data, as: UTF8.self)
        do {
            if try SSHPrivateKey.isEncrypted(pem: text) {
                guard let ask = prompts.passphrase else {
                    state.withLock { $0.notes.append("\(path) needs a passphrase and there is no way to ask for it") }
                    return nil
                }
                for _ in 0..<3 {
                    // The answer and the key derived from it (bcrypt: seconds on a slow or busy
                    // machine) are the person's time, not the server's: the handshake timeout
                    // waits for both.
                    let attempt: Result<SSHPrivateKey, SSHPrivateKey.LoadError>? = await failures.prompting {
                        guard let passphrase = await ask(path) else { return nil }
                        do throws(SSHPrivateKey.LoadError) {
                            return .success(try SSHPrivateKey(pem: text, passphrase: Array(passphrase.utf8)))
                        } catch {
                            return .failure(error)
                        }
                    }
                    switch attempt {
                    case nil: return nil
                    case .success(let key): return key
                    case .failure(.wrongPassphrase):
                        logger.warning("wrong passphrase for \(path)")
                        continue
                    case .failure(let error): throw error
                    }
                }
                state.withLock { $0.notes.append("wrong passphrase for \(path)") }
                return nil
            }
            return try SSHPrivateKey(pem: text)
        } catch {
            state.withLock { $0.notes.append("\(path): \(error)") }
            return nil
        }
    }
}
