@testable import Hosts
import Testing

/// How farcast runs the user's OpenSSH: FARCAST_SSH_COMMAND read as a shell would split it
/// (nothing expanded), argument lists with the destination after `--`, nothing that ssh could
/// take for an option, and ssh's stderr turned into the error a person can act on. The ssh
/// lines below are OpenSSH 9's own wording (sshconnect.c, channels.c, mux.c, sshconnect2.c).
struct OpenSSHCommandTests {
    @Test func theCommandVariableIsSplitAsAShellWouldWithoutExpanding() throws {
        #expect(try OpenSSHCommand.words("ssh -F '/my dir/config' -o \"User=a b\" x\\ y $HOME") == ["ssh", "-F", "/my dir/config", "-o", "User=a b", "x y", "$HOME"])
        #expect(try OpenSSHCommand.words("  ssh\t-v  ") == ["ssh", "-v"])
        #expect(try OpenSSHCommand.words("ssh ''") == ["ssh", ""])
        #expect(try OpenSSHCommand.words("a\"b\\\"c\"d") == ["ab\"cd"])
        for unbalanced in ["ssh 'x", "ssh \"x", "ssh x\\"] {
            #expect(throws: SSHTunnelError.self, "\(unbalanced)") { try OpenSSHCommand.words(unbalanced) }
        }
        let found = try #require(try OpenSSHCommand.find(environment: ["FARCAST_SSH_COMMAND": "sh -c true", "PATH": "/usr/bin:/bin"]))
        #expect(found.program.hasSuffix("/sh") && found.leadingArguments == ["-c", "true"])
        #expect(throws: SSHTunnelError.self) { try OpenSSHCommand.find(environment: ["FARCAST_SSH_COMMAND": "no-such-ssh-program", "PATH": "/usr/bin"]) }
        #expect(try OpenSSHCommand.find(environment: ["PATH": "/nonexistent"]) == nil)
    }

    @Test func theDestinationComesAfterDoubleDashAndNeverLooksLikeAnOption() throws {
        let command = OpenSSHCommand(program: "/usr/bin/ssh", leadingArguments: ["-F", "cfg"])
        let route = SSHRoute(user: "me", host: "bastion", port: 2222)
        #expect(try command.stream(route, to: "fe80::1", port: 5901, controlPath: "/run/x/master", settings: ["-o", "BatchMode=yes"])
                == ["/usr/bin/ssh", "-F", "cfg", "-W", "[fe80::1]:5901", "-T", "-o", "ExitOnForwardFailure=yes", "-o", "ControlMaster=no",
                    "-o", "ControlPath=/run/x/master", "-o", "BatchMode=yes", "-p", "2222", "-l", "me", "--", "bastion"])
        #expect(try command.master(SSHRoute(host: "bastion"), controlPath: "/run/x/master", settings: [])
                == ["/usr/bin/ssh", "-F", "cfg", "-N", "-T", "-o", "ControlMaster=yes", "-o", "ControlPath=/run/x/master", "-o", "ControlPersist=no", "--", "bastion"])
        #expect(try command.stream(SSHRoute(host: "b"), to: "t", port: 1, controlPath: nil, settings: []).contains("ControlMaster=no") == false)
        for route in [SSHRoute(host: "-oProxyCommand=sh"), SSHRoute(user: "-oProxyCommand=sh", host: "b")] {
            #expect(throws: SSHTunnelError.self, "\(route)") { try command.stream(route, to: "t", port: 1, controlPath: nil, settings: []) }
        }
        for text in ["-oProxyCommand=sh", "-x@host", "me@-host"] {
            #expect(throws: SSHTunnelError.self, "\(text)") { try SSHRoute(parsing: text) }
        }
    }

    @Test func sshsOwnWordsBecomeTheTypedError() {
        let via = "me@bastion:2222"
        func failure(_ stderr: String, target: String? = "10.0.0.5:5901") -> SSHTunnelError {
            OpenSSHCommand.failure(stderr: stderr, status: 255, via: via, target: target)
        }
        #expect(failure("channel 1: open failed: administratively prohibited: open failed\nStdio forwarding request failed: Session open refused by peer")
                == .forwardingRefused(bastion: via, target: "10.0.0.5:5901", reason: "channel 1: open failed: administratively prohibited: open failed"))
        #expect(failure("channel 2: open failed: connect failed: Connection refused\nStdio forwarding request failed: Session open refused by peer")
                == .targetUnreachable(bastion: via, target: "10.0.0.5:5901", reason: "connection refused"))
        #expect(failure("ssh: Could not resolve hostname nowhere.invalid: Name or service not known", target: nil)
                == .connectFailed(host: via, reason: "Could not resolve hostname nowhere.invalid: Name or service not known"))
        #expect(failure("ssh: connect to host 127.0.0.1 port 9: Connection refused", target: nil)
                == .connectFailed(host: via, reason: "connect to host 127.0.0.1 port 9: Connection refused"))
        let denied = failure("me@bastion: Permission denied (publickey,keyboard-interactive).", target: nil).description
        #expect(denied.contains("Permission denied") && denied.contains("the server accepts: publickey,keyboard-interactive"), "\(denied)")
        let unknown = failure("No ED25519 host key is known for [127.0.0.1]:22000 and you have requested strict checking.\nHost key verification failed.", target: nil).description
        #expect(unknown.contains("Host key verification failed") && unknown.contains("--accept-new"), "\(unknown)")
        let changed = failure("@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\nHost key verification failed.", target: nil).description
        #expect(changed.contains("ssh-keygen -R"), "\(changed)")
        let foreign = failure("kex_exchange_identification: banner line contains invalid characters", target: nil).description
        #expect(foreign.contains("other than an SSH server"), "\(foreign)")
        let quiet = failure("", target: nil).description
        #expect(quiet.contains("exit status 255") && quiet.contains("-v"), "\(quiet)")
        // Debug lines (ssh -v in FARCAST_SSH_COMMAND) are not what failed.
        let noisy = failure("debug1: Reading configuration data /etc/ssh/ssh_config\nssh: connect to host h port 22: No route to host", target: nil)
        #expect(noisy == .connectFailed(host: via, reason: "connect to host h port 22: No route to host"))
    }
}
