import ArgumentParser

struct VNCCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vnc",
        abstract: "Remote desktops over RFB/VNC.",
        discussion: "The RFB engine has not landed yet: this group has no commands so far.",
        subcommands: []
    )
}
