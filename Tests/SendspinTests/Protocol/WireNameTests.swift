import Foundation
@testable import Sendspin
import Testing

/// Names the wire spells as strings: known ones become cases, unknown ones survive as themselves.
@Suite struct WireNameTests {
    @Test func knownNamesAreCasesAndUnknownOnesKeepTheirSpelling() throws {
        #expect(PSKCategory(rawValue: "lt") == .longTerm && PSKCategory(rawValue: "pr") == .pairing && PSKCategory(rawValue: "sn") == .sentinel)
        #expect(PSKCategory(rawValue: "zz") == .other("zz"))
        #expect(Activity(rawValue: "pairing") == .pairing && Activity(rawValue: "dancing") == .other("dancing"))
        #expect(ControllerCommand.Name(rawValue: "repeat_one") == .repeatOne && ControllerCommand.Name(rawValue: "seek_relative") == .seekRelative)
        #expect(ControllerCommand.all.count == 15 && ControllerCommand.all.allSatisfy { ControllerCommand.Name(rawValue: $0).rawValue == $0 })
        #expect(Activity.other("playback") == .playback, "equality goes by the wire string")
    }

    @Test func theyCodeAndPrintAsTheWireStrings() throws {
        let activate = try JSONDecoder().decode(ServerActivate.self, from: Data(#"{"activities":["playback","future"]}"#.utf8))
        #expect(activate.activities == [.playback, .other("future")])
        #expect("\(activate.activities)" == #"["playback", "future"]"#)
        let command = String(decoding: try JSONEncoder().encode(ControllerCommand(command: .repeatAll)), as: UTF8.self)
        #expect(command == #"{"command":"repeat_all"}"#)
    }
}
