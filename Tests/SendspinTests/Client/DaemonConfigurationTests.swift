import Testing
import Sendspin

struct DaemonConfigurationTests {
    @Test func readsEveryKeyWithCommentsQuotesAndDefaults() throws {
        let c = try DaemonConfiguration(text: """
            # Kitchen speaker
            name = "Kitchen # 1"
              output=alsa:hw:0,0
            output_delay_ms = 40   # amplifier

            port = 9000
            codec = opus
            """)
        #expect(c.name == "Kitchen # 1")
        #expect(c.output == "alsa:hw:0,0")
        #expect(c.outputDelayMs == 40)
        #expect(c.port == 9000)
        #expect(c.codec == "opus")
        #expect(c.host == "0.0.0.0" && c.path == "/sendspin" && c.server == nil && c.suite == "chachapoly")
        #expect(try DaemonConfiguration(text: "") == DaemonConfiguration())
    }

    @Test(arguments: [
        ("volume = 3", "line 1: unknown key 'volume'"),
        ("name = a\nname = b", "line 2: 'name' is set twice"),
        ("\n\noutput_delay_ms = -5", "line 3: output_delay_ms must be a whole number in 0…5000"),
        ("output = pulse", "line 1: output must be alsa:DEVICE, null or wav:PATH"),
        ("server = http://x", "line 1: server must be a ws:// URL"),
        ("just words", "line 1: expected `key = value`"),
        ("path = speaker", "line 1: path must start with /"),
        ("name = \"Unclosed", "line 1: unbalanced quotes"),
        ("name = a \"b\" c\"", "line 1: unbalanced quotes"),
    ])
    func refusesWithTheLineAndWhatIsWrong(_ text: String, _ message: String) {
        #expect {
            try DaemonConfiguration(text: text)
        } throws: { error in
            "\(error)".hasPrefix(message)
        }
    }
}
