import ArgumentParser
import Hosts
import FarcastSupport
import Foundation

#if canImport(Glibc)
import Glibc
#endif

@main
struct Farcast: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "farcast",
        abstract: "Native clients for the streams you run on your own machines.",
        discussion: """
            Protocols:
              vnc        remote desktops (RFB 3.3, 3.7, 3.8 and macOS 3.889)
              sendspin   synchronized multi-room audio (Sendspin, encrypted wire)
              punktfunk  low-latency game and desktop streaming (punktfunk/1 over QUIC)
              jellyfin   Jellyfin media libraries: sign in, browse, search, live session
              tun        TUN/TAP devices: up, echo, pipe (Linux, needs CAP_NET_ADMIN)
              discover   what answers on the local network, for every protocol
              hosts      the host book: saved names for every command; --ssh tunnels

            Text goes to stdout (JSON with --json); logs and progress go to stderr. A failure prints one line, `farcast: <reason>`, and exits 1; a mistake in the command line or a configuration file exits 2 (docs/cli.md). Ctrl-C or SIGTERM stops any command within a second. Secrets such as passwords are never read from the command line: use a file, an environment variable or the prompt. Identities and trust pins live in $XDG_STATE_HOME/farcast, else ~/.local/state/farcast.

            Example: farcast vnc screenshot myhost:1 -o desktop.png
            """,
        version: "farcast \(FarcastInfo.version)",
        subcommands: [VNCCommand.self, SendspinCommand.self, PunktfunkCommand.self, JellyfinCommand.self, TunCommand.self, WireGuardCommand.self, DiscoverCommand.self, HostsCommand.self, DoctorCommand.self]
    )

    /// The entry point: parse, run the command as a task that a signal can cancel, and turn
    /// every way of ending into the policy's exit code and one line (docs/cli.md).
    static func main() async {
        // Started by ssh as its SSH_ASKPASS (farcast asks ssh's questions in a viewer window).
        if let status = OpenSSHAskpass.answerIfAsked() { Glibc.exit(status) }
        Signals.install()
        let arguments = Array(CommandLine.arguments.dropFirst())
        let command: any ParsableCommand
        do {
            command = try parseAsRoot(arguments)
        } catch {
            exitForParsing(error, arguments: arguments)
        }
        let handOver = CommandHandOver(command: command)
        let task = Task<Void, any Error> {
            if var asyncCommand = handOver.command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                var plain = handOver.command
                try plain.run()
            }
        }
        Signals.commandStarted(task)
        do {
            try await task.value
            Glibc.exit(0)
        } catch let code as ExitCode {
            Glibc.exit(code.rawValue)
        } catch {
            exitForRunning(error, arguments: arguments)
        }
    }

    /// Help and version print as usual; a usage mistake is one line and exit 2.
    private static func exitForParsing(_ error: any Error, arguments: [String]) -> Never {
        // --help and --version arrive as errors that exit 0; ArgumentParser prints them.
        if error is CleanExit || exitCode(for: error) == .success { Self.exit(withError: error) }
        if let code = error as? ExitCode { Glibc.exit(code.rawValue) }
        FileHandleOutput.stderr("farcast: \(oneLine(message(for: error))) (see `\(helpCommand(for: arguments))`)\n")
        Glibc.exit(2)
    }

    private static func exitForRunning(_ error: any Error, arguments: [String]) -> Never {
        // A command group run without a subcommand asks for its help this way.
        if error is CleanExit || exitCode(for: error) == .success { Self.exit(withError: error) }
        switch error {
        case let failure as CommandFailure:
            FileHandleOutput.stderr("farcast: \(failure.message)\n")
            Glibc.exit(failure.exitCode)
        case let validation as ValidationError:
            FileHandleOutput.stderr("farcast: \(oneLine(validation.message)) (see `\(helpCommand(for: arguments))`)\n")
            Glibc.exit(2)
        case is CancellationError:
            let signal = Signals.received.map { " by \(Signals.name($0))" } ?? ""
            FileHandleOutput.stderr("farcast: interrupted\(signal)\n")
            Glibc.exit(1)
        default:
            if let signal = Signals.received {
                // Whatever was waiting reported its own way of being cut short.
                FileHandleOutput.stderr("farcast: interrupted by \(Signals.name(signal))\n")
                Glibc.exit(1)
            }
            FileHandleOutput.stderr("farcast: \(describe(error))\n")
            Glibc.exit(1)
        }
    }

    /// `farcast vnc screenshot --help` for the subcommand the arguments name, as far as they do.
    private static func helpCommand(for arguments: [String]) -> String {
        var path = ["farcast"]
        var current: any ParsableCommand.Type = Farcast.self
        for word in arguments where !word.hasPrefix("-") {
            guard let next = current.configuration.subcommands.first(where: { $0._commandName == word }) else { break }
            path.append(word)
            current = next
        }
        return (path + ["--help"]).joined(separator: " ")
    }
}

/// Moves the parsed command into the task that runs it.
private struct CommandHandOver: @unchecked Sendable {
    // @unchecked: main parses the command and never touches it again after creating the task,
    // so the task is its only user.
    let command: any ParsableCommand
}
