import ArgumentParser
import FarcastSupport

@main
struct Farcast: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "farcast",
        abstract: "Native clients for the streams you run on your own machines.",
        discussion: """
            Protocols:
              vnc        remote desktops (RFB 3.3, 3.7, 3.8 and macOS 3.889)
              sendspin   synchronized multi-room audio (Sendspin, encrypted wire)
              tun        TUN/TAP devices: up, echo, pipe (Linux, needs CAP_NET_ADMIN)

            Text goes to stdout (JSON with --json); logs and progress go to stderr. Secrets such as passwords are never read from the command line: use a file, an environment variable or the prompt. Identities and trust pins live in $XDG_STATE_HOME/farcast, else ~/.local/state/farcast.
            """,
        version: "farcast \(FarcastInfo.version)",
        subcommands: [VNCCommand.self, SendspinCommand.self, TunCommand.self, DoctorCommand.self]
    )
}
