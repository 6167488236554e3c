import ArgumentParser
import FarcastSupport
import Foundation
import Jellyfin

struct JellyfinLyricsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lyrics",
        abstract: "Show a track's lyrics (synced ones with their times).",
        discussion: """
            Prints the lyrics the server has for an audio item: each line with its time as [m:ss.cc] when they are synced (LRC), plain lines otherwise. A track without lyrics is an error that says so.

            Examples:
              farcast jellyfin lyrics "A 220"
              farcast jellyfin lyrics "A 220" --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: ArgumentHelp("The track: name or id.", valueName: "ITEM"))
    var item: String

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            let resolved = try await JellyfinCLI.resolveItem(item, in: session)
            guard let lyrics = try await session.lyrics(resolved.id) else {
                throw CommandFailure(message: "\(resolved.name) has no lyrics on the server")
            }
            if global.json {
                return try printJSON(Result(synced: lyrics.isSynced, items: lyrics.lines.map { Line(startSeconds: $0.startSeconds, text: $0.text) }))
            }
            for line in lyrics.lines {
                if let start = line.startSeconds {
                    let centiseconds = Int((start * 100).rounded())
                    print(String(format: "[%d:%02d.%02d] ", centiseconds / 6000, centiseconds / 100 % 60, centiseconds % 100) + line.text)
                } else {
                    print(line.text)
                }
            }
        }
    }

    struct Result: Encodable {
        var synced: Bool
        var items: [Line]
    }

    struct Line: Encodable {
        var startSeconds: Double?
        var text: String
    }
}
