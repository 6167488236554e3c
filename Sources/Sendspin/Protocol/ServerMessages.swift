/// The server's messages that mean the same on both wires — clock answers, stream control,
/// group and state updates, player commands — read into the events they report.
enum ServerMessages {
    /// The events for a message of `type`, or nil when `type` is not one of these (the core
    /// decides what it means); a body that does not decode throws. `roles`: the role families
    /// beyond the player the client offered (`artwork`, `visualizer`, `color`): their streams'
    /// starts, clears and ends and their state are reported.
    static func events(type: String, body: [UInt8], at time: Int64, roles: Set<String> = []) throws -> [SendspinEvent]? {
        switch type {
        case "server/time":
            return [.serverTime(try WireJSON.decode(ServerTime.self, from: body), receivedAt: time)]
        case "stream/start":
            let start = try WireJSON.decode(StreamStart.self, from: body)
            var events: [SendspinEvent] = [.streamStart(start.player)]
            if roles.contains("artwork"), let artwork = start.artwork { events.append(.artworkStream(artwork.channels)) }
            if roles.contains("visualizer"), let visualizer = start.visualizer { events.append(.visualizerStream(visualizer)) }
            return events
        case "stream/clear":
            return (concerns("player", body) ? [.streamClear] : []) + (roles.contains("visualizer") && concerns("visualizer", body) ? [.visualizerCleared] : [])
        case "stream/end":
            return (concerns("player", body) ? [.streamEnd] : []) + (roles.contains("artwork") && concerns("artwork", body) ? [.artworkEnded] : [])
                + (roles.contains("visualizer") && concerns("visualizer", body) ? [.visualizerEnded] : [])
        case "group/update":
            return [.groupUpdate(try WireJSON.decode(GroupUpdate.self, from: body))]
        case "server/state":
            let state = try WireJSON.decode(ServerState.self, from: body)
            var events = [state.metadata.map(SendspinEvent.metadata), state.controller.map(SendspinEvent.controller)].compactMap { $0 }
            if roles.contains("color") {
                do {
                    if let palette = try WireJSON.decode(ServerStateColor.self, from: body).color {
                        events.append(palette.problem.map { .malformedVisualization($0) } ?? .color(palette))
                    }
                } catch {
                    events.append(.malformedVisualization("a color palette that does not read (\(error.description))"))
                }
            }
            return events
        case "server/command":
            let command = try WireJSON.decode(ServerCommand.self, from: body)
            return (command.player.map { [.playerCommand($0)] } ?? []) + (roles.contains("source") ? command.source.map { [.sourceCommand($0.command)] } ?? [] : [])
        default:
            return nil
        }
    }

    /// stream/clear and stream/end name the roles they apply to; none named (or a body that
    /// does not say) means all of them.
    private static func concerns(_ role: String, _ body: [UInt8]) -> Bool {
        (try? WireJSON.decode(StreamRoles.self, from: body).roles).map { $0?.contains(role) ?? true } ?? true
    }
}
