import Foundation
import Synchronization

/// A real OpenSSH server (Debian's sshd) for one test, on 127.0.0.1 with its own host keys,
/// configuration and user.
///
/// The user exists only for this server: sshd runs in a private mount namespace whose
/// /etc/passwd and /etc/shadow are copies with the user added (as `PAMUser` does for VNC), and
/// whose /run is a fresh tmpfs holding the privilege-separation folder sshd insists on; nothing
/// on the machine changes. Password checks use the shadow copy directly (`UsePAM no`); keys come
/// from an `AuthorizedKeysFile` in the test's folder.
final class SSHServer: @unchecked Sendable {
    // @unchecked: everything is set in init; the process is only stopped afterwards.
    static let user = "fcssh"
    static let password = "ssh pässword 1"

    let port: Int
    let folder: String
    let process: BackgroundProcess
    /// The host key's fingerprint as `ssh-keygen -l` prints it.
    let hostKeyFingerprint: String
    /// The host key as a known_hosts key field ("ssh-ed25519 AAAA…").
    let hostKeyLine: String

    /// Ports handed out to sshd instances of this test process.
    private static let nextPort = Mutex(22_000 + Int(getpid() % 500) * 8)

    /// - Parameter names: host names only this server resolves (`[name: address]`, added to an
    ///   /etc/hosts seen by sshd alone), so a target reached by such a name was reached from the
    ///   server's side, never directly.
    /// - Parameter keyboardInteractive: the password asked through PAM by keyboard-interactive
    ///   (pam_unix against the shadow copy, a PAM stack of the test's own bind-mounted over
    ///   /etc/pam.d/sshd), and no plain password authentication.
    init(in parent: TemporaryFolder, name: String = "sshd", authorizedKeys: [String] = [], allowTcpForwarding: Bool = true,
         extraConfig: String = "", names: [String: String] = [:], keyboardInteractive: Bool = false) throws {
        let sshd = try requireExecutable("/usr/sbin/sshd", package: "openssh-server")
        let keygen = try requireExecutable("ssh-keygen", package: "openssh-client")
        let unshare = try requireExecutable("unshare", package: "util-linux")
        port = Self.nextPort.withLock { port in
            defer { port += 1 }
            return port
        }
        folder = parent.path + "/\(name)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        // sshd reads authorized_keys as the user after dropping privileges: it must reach the file.
        chmod(parent.path, 0o711)
        let hostKey = folder + "/host_ed25519"
        let made = try run(keygen, ["-q", "-t", "ed25519", "-N", "", "-C", "farcast-test-host", "-f", hostKey])
        guard made.status == 0 else { throw PeerFailed(name: "ssh-keygen", log: made.stderr) }
        let publicLine = try String(contentsOfFile: hostKey + ".pub", encoding: .utf8)
        hostKeyLine = publicLine.split(separator: " ").prefix(2).joined(separator: " ")
        let listed = try run(keygen, ["-l", "-E", "sha256", "-f", hostKey + ".pub"])
        hostKeyFingerprint = String(listed.stdout.split(separator: " ")[1])

        let authorized = folder + "/authorized_keys"
        try authorizedKeys.joined(separator: "\n").appending("\n").write(toFile: authorized, atomically: true, encoding: .utf8)
        chmod(authorized, 0o644)
        let home = folder + "/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])

        let hashed = try run(try requireExecutable("openssl", package: "openssl"), ["passwd", "-6", "-stdin"], stdin: Data((Self.password + "\n").utf8))
        guard hashed.status == 0 else { throw PeerFailed(name: "openssl passwd", log: hashed.stderr) }
        let passwd = folder + "/passwd", shadow = folder + "/shadow"
        try (try String(contentsOfFile: "/etc/passwd", encoding: .utf8) + "\(Self.user):x:64124:64124:farcast ssh test:\(home):/bin/sh\n")
            .write(toFile: passwd, atomically: true, encoding: .utf8)
        try (try String(contentsOfFile: "/etc/shadow", encoding: .utf8)
             + "\(Self.user):\(hashed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)):19000:0:99999:7:::\n")
            .write(toFile: shadow, atomically: true, encoding: .utf8)
        chmod(passwd, 0o644)
        chmod(shadow, 0o640)

        let config = folder + "/sshd_config"
        // sshd takes the first value of each keyword: the test's own lines go first.
        try """
            \(extraConfig)
            Port \(port)
            ListenAddress 127.0.0.1
            HostKey \(hostKey)
            PidFile none
            AuthorizedKeysFile \(authorized)
            StrictModes no
            UsePAM \(keyboardInteractive ? "yes" : "no")
            PasswordAuthentication \(keyboardInteractive ? "no" : "yes")
            KbdInteractiveAuthentication \(keyboardInteractive ? "yes" : "no")
            PubkeyAuthentication yes
            PermitRootLogin no
            AllowUsers \(Self.user)
            AllowTcpForwarding \(allowTcpForwarding ? "yes" : "no")
            HostbasedAuthentication no
            LogLevel DEBUG1
            """.write(toFile: config, atomically: true, encoding: .utf8)
        // A configuration mistake ends sshd at once; waitForTCPPort then reports its log.
        let script = """
            mount --bind "$1" /etc/passwd && mount --bind "$2" /etc/shadow && mount --bind "$3" /etc/hosts \
            && { [ -z "$4" ] || mount --bind "$4" /etc/pam.d/sshd; } \
            && mount -t tmpfs -o mode=755 tmpfs /run && mkdir -m 755 /run/sshd && shift 4 && exec "$@"
            """
        var pam = ""
        if keyboardInteractive {
            guard FileManager.default.fileExists(atPath: "/etc/pam.d/sshd") else {
                throw PeerFailed(name: "sshd", log: "/etc/pam.d/sshd is missing: apt-get install openssh-server (scripts/setup does)")
            }
            pam = folder + "/pam-sshd"
            try "auth required pam_unix.so\naccount required pam_permit.so\nsession required pam_permit.so\npassword required pam_deny.so\n"
                .write(toFile: pam, atomically: true, encoding: .utf8)
            chmod(pam, 0o644)
        }
        let hosts = folder + "/hosts"
        try ((try? String(contentsOfFile: "/etc/hosts", encoding: .utf8)) ?? "127.0.0.1 localhost\n")
            .appending(names.map { "\($0.value) \($0.key)\n" }.joined())
            .write(toFile: hosts, atomically: true, encoding: .utf8)
        chmod(hosts, 0o644)
        process = try BackgroundProcess(unshare, ["-m", "sh", "-c", script, "sh", passwd, shadow, hosts, pam, sshd, "-D", "-e", "-f", config],
                                        logName: name)
        try waitForTCPPort(port, process: process)
    }

    /// A known_hosts line for this server under OpenSSH's name for it (`[127.0.0.1]:port`).
    var knownHostsLine: String { "[127.0.0.1]:\(port) \(hostKeyLine)" }

    /// What sshd logged so far.
    var log: String { process.log }

    func stop() { process.stop() }
    deinit { stop() }
}

/// A user key made by ssh-keygen for one test.
struct SSHTestKey {
    let path: String
    let publicLine: String
    let passphrase: String?

    init(type: String, bits: Int? = nil, passphrase: String? = nil, in folder: TemporaryFolder) throws {
        let keygen = try requireExecutable("ssh-keygen", package: "openssh-client")
        path = folder.path + "/id_\(type)\(bits.map { "_\($0)" } ?? "")\(passphrase == nil ? "" : "_enc")"
        var arguments = ["-q", "-t", type, "-N", passphrase ?? "", "-C", "farcast-test", "-f", path]
        if let bits { arguments += ["-b", "\(bits)"] }
        // Few bcrypt rounds keep the tests quick; the derivation is the same at any count.
        if passphrase != nil { arguments += ["-a", "8"] }
        let made = try run(keygen, arguments)
        guard made.status == 0 else { throw PeerFailed(name: "ssh-keygen", log: made.stderr) }
        publicLine = try String(contentsOfFile: path + ".pub", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        self.passphrase = passphrase
    }
}

/// A TCP server on 127.0.0.1 that echoes what it reads, prefixed by a greeting it sends first
/// (as an RFB server speaks first), for tunnel tests that need no VNC.
final class EchoServer: @unchecked Sendable {
    // @unchecked: the socket and thread are set in init; `stop` closes the socket once.
    let port: Int
    private let fd: Int32
    private let stopped = Mutex(false)

    init(greeting: String = "hello\n") throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 8) == 0 else { close(fd); throw PeerFailed(name: "echo server", log: String(cString: strerror(errno))) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        self.fd = fd
        let listener = fd
        let greetingBytes = Array(greeting.utf8)
        Thread.detachNewThread {
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                Thread.detachNewThread {
                    defer { close(client) }
                    _ = greetingBytes.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
                    var buffer = [UInt8](repeating: 0, count: 65536)
                    while true {
                        let count = read(client, &buffer, buffer.count)
                        guard count > 0 else { return }
                        var offset = 0
                        while offset < count {
                            let written = buffer.withUnsafeBytes { write(client, $0.baseAddress! + offset, count - offset) }
                            guard written > 0 else { return }
                            offset += written
                        }
                    }
                }
            }
        }
    }

    func stop() {
        guard stopped.withLock({ let was = $0; $0 = true; return !was }) else { return }
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }

    deinit { stop() }
}
