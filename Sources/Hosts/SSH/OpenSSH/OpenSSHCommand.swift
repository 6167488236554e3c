import Foundation

/// The user's OpenSSH client as farcast runs it: the program and its leading arguments (from
/// `FARCAST_SSH_COMMAND`, as git takes `GIT_SSH_COMMAND`, else `ssh` found on PATH), and the
/// argument lists for a master, a `-W` stream and the master's `-O exit`. Nothing goes through
/// a shell; the destination always follows `--`, and a host or user that begins with `-` is
/// refused before anything runs (it would be read as an option: TigerVNC's `-via` injection).
public struct OpenSSHCommand: Sendable, Equatable {
    /// The program, as an absolute path.
    public var program: String
    /// Arguments placed before farcast's own (e.g. `-F ~/.ssh/other_config`).
    public var leadingArguments: [String]

    public init(program: String, leadingArguments: [String] = []) {
        self.program = program
        self.leadingArguments = leadingArguments
    }

    /// `FARCAST_SSH_COMMAND` split into words (quotes and backslashes as a shell reads them,
    /// nothing expanded), else `ssh` on PATH; nil when there is neither. A program named without
    /// a slash is looked up on PATH.
    public static func find(environment: [String: String] = ProcessInfo.processInfo.environment) throws(SSHTunnelError) -> OpenSSHCommand? {
        if let text = environment["FARCAST_SSH_COMMAND"], !text.trimmingCharacters(in: .whitespaces).isEmpty {
            let words = try Self.words(text)
            guard let first = words.first else { return nil }
            guard let program = locate(first, path: environment["PATH"]) else {
                throw .sshFailed(host: "FARCAST_SSH_COMMAND", said: "\(first): not found", hint: "FARCAST_SSH_COMMAND names a program that is not on PATH")
            }
            return OpenSSHCommand(program: program, leadingArguments: Array(words.dropFirst()))
        }
        return locate("ssh", path: environment["PATH"]).map { OpenSSHCommand(program: $0) }
    }

    static func locate(_ name: String, path: String?) -> String? {
        if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        for folder in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") where !folder.isEmpty {
            let candidate = "\(folder)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Splits a command line into words as a POSIX shell would without expanding anything:
    /// single quotes keep everything, double quotes keep all but `\"` and `\\`, a backslash
    /// outside quotes keeps the next character.
    static func words(_ text: String) throws(SSHTunnelError) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var quote: Character?
        var escaped = false
        for character in text {
            if escaped {
                current.append(character)
                escaped = false
                continue
            }
            switch (quote, character) {
            case (nil, "\\"), ("\"", "\\"):
                escaped = true
                inWord = true
            case (nil, "'"), (nil, "\""):
                quote = character
                inWord = true
            case ("'", "'"), ("\"", "\""):
                quote = nil
            case (nil, _) where character == " " || character == "\t" || character == "\n":
                if inWord { words.append(current) }
                current = ""
                inWord = false
            default:
                current.append(character)
                inWord = true
            }
        }
        guard quote == nil, !escaped else {
            throw .sshFailed(host: "FARCAST_SSH_COMMAND", said: text, hint: "its quotes or backslashes are unbalanced")
        }
        if inWord { words.append(current) }
        return words
    }

    /// The destination part: `[-p PORT] [-l USER] … -- HOST`, refusing what could be read as an option.
    func destination(_ route: SSHRoute) throws(SSHTunnelError) -> (options: [String], host: [String]) {
        if route.host.hasPrefix("-") { throw .invalidRoute(route.description, reason: "a host name cannot begin with '-'") }
        if let user = route.user, user.hasPrefix("-") { throw .invalidRoute(route.description, reason: "a user name cannot begin with '-'") }
        var options: [String] = []
        if let port = route.port { options += ["-p", "\(port)"] }
        if let user = route.user { options += ["-l", user] }
        return (options, ["--", route.host])
    }

    /// `ssh -G`: the configuration ssh would use for `route` (lower-case keywords, as printed).
    func configurationQuery(_ route: SSHRoute) throws(SSHTunnelError) -> [String] {
        let (options, host) = try destination(route)
        return [program] + leadingArguments + ["-G"] + options + host
    }

    /// A master of farcast's own: authenticates once, then carries every `-W` stream of the
    /// command through `controlPath`. `-N`: no command; it lives until `-O exit` or a signal.
    func master(_ route: SSHRoute, controlPath: String, settings: [String]) throws(SSHTunnelError) -> [String] {
        let (options, host) = try destination(route)
        return [program] + leadingArguments
            + ["-N", "-T", "-o", "ControlMaster=yes", "-o", "ControlPath=\(controlPath)", "-o", "ControlPersist=no"]
            + settings + options + host
    }

    /// One stream: `ssh -W [host]:port`, its stdin and stdout the connection. Through the master
    /// at `controlPath` when farcast runs one; else the user's own configuration decides.
    func stream(_ route: SSHRoute, to target: String, port: Int, controlPath: String?, settings: [String]) throws(SSHTunnelError) -> [String] {
        let (options, host) = try destination(route)
        let bracketed = target.contains(":") ? "[\(target)]" : target
        var arguments = [program] + leadingArguments + ["-W", "\(bracketed):\(port)", "-T", "-o", "ExitOnForwardFailure=yes"]
        if let controlPath { arguments += ["-o", "ControlMaster=no", "-o", "ControlPath=\(controlPath)"] }
        return arguments + settings + options + host
    }

    /// `-O exit` to the master at `controlPath`: it ends and removes its socket.
    func exitMaster(_ route: SSHRoute, controlPath: String) throws(SSHTunnelError) -> [String] {
        let (options, host) = try destination(route)
        return [program] + leadingArguments + ["-O", "exit", "-o", "ControlPath=\(controlPath)"] + options + host
    }

    /// What ssh's stderr says went wrong, as the typed error a person can act on; ssh's own
    /// words are kept in every case (its exit status alone says nothing).
    static func failure(stderr: String, status: Int32, via: String, target: String?) -> SSHTunnelError {
        let lines = stderr.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("debug") && !$0.hasPrefix("Warning: Permanently added") }
        let said = lines.suffix(3).joined(separator: "; ")
        func line(containing text: String) -> String? { lines.last { $0.localizedCaseInsensitiveContains(text) } }
        if let target, let open = line(containing: "administratively prohibited") ?? line(containing: "stdio forwarding failed") {
            return .forwardingRefused(bastion: via, target: target, reason: open)
        }
        if let target, let open = line(containing: "open failed: connect failed") ?? line(containing: "open failed") {
            let reason = open.range(of: "connect failed: ").map { String(open[$0.upperBound...]) } ?? open
            return .targetUnreachable(bastion: via, target: target, reason: reason.lowercased())
        }
        if let denied = line(containing: "Permission denied (") {
            let methods = denied.range(of: "(").flatMap { start in denied.range(of: ")", range: start.upperBound..<denied.endIndex).map { denied[start.upperBound..<$0.lowerBound] } }
            return .sshFailed(host: via, said: said, hint: "authentication was refused; the server accepts: \(methods ?? "?")"
                + " (add the key to ssh-agent or name it with IdentityFile in ~/.ssh/config; at a terminal ssh asks for passwords and codes itself)")
        }
        if line(containing: "REMOTE HOST IDENTIFICATION HAS CHANGED") != nil {
            return .sshFailed(host: via, said: "REMOTE HOST IDENTIFICATION HAS CHANGED", hint: "the host key differs from the one in known_hosts; someone could be eavesdropping, or the key was replaced: if the change is expected, remove the old key with `ssh-keygen -R HOST` and connect again")
        }
        if line(containing: "Host key verification failed") != nil {
            return .sshFailed(host: via, said: said, hint: "the host key is not in known_hosts and ssh could not ask (no terminal); check its fingerprint and connect once with `ssh` at a terminal, or pass --accept-new")
        }
        if let resolve = line(containing: "Could not resolve hostname") {
            return .connectFailed(host: via, reason: resolve.replacingOccurrences(of: "ssh: ", with: ""))
        }
        if let connect = line(containing: "connect to host") {
            return .connectFailed(host: via, reason: connect.replacingOccurrences(of: "ssh: ", with: ""))
        }
        if let banner = line(containing: "kex_exchange_identification") ?? line(containing: "banner exchange") {
            return .sshFailed(host: via, said: banner, hint: "something other than an SSH server may be answering there; check the SSH port")
        }
        return .sshFailed(host: via, said: said.isEmpty ? "exit status \(status), nothing on stderr" : said, hint: "run the same with -v to see what ssh did")
    }
}
