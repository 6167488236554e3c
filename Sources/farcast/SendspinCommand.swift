import ArgumentParser

struct SendspinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sendspin",
        abstract: "Synchronized multi-room audio over Sendspin.",
        discussion: "The Sendspin player has not landed yet: this group has no commands so far.",
        subcommands: []
    )
}
