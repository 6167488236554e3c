/// The F8 menu: its items, as they read for the window's current settings, and what choosing
/// one does. Pure (the window draws it and routes keys and clicks here), so tests can walk it.
public struct ViewerMenu: Sendable, Equatable {
    public enum Item: Sendable, Equatable, Hashable {
        case fullscreen, viewOnly, scale, monitor, clipboard, keyboardGrab, relativePointer, hud
        case sendCtrlAltDel, sendMenuKey, reconnect, disconnect, close
        /// An item the protocol side added (`ViewerConfiguration.menuActions`): its label, and
        /// what choosing it sends back (`ViewerCommand.action`).
        case action(String)

        /// Every built-in item, in menu order.
        public static let standard: [Item] = [.fullscreen, .viewOnly, .scale, .monitor, .clipboard, .keyboardGrab, .relativePointer, .hud,
                                              .sendCtrlAltDel, .sendMenuKey, .reconnect, .disconnect, .close]
    }

    /// The settings the menu shows and toggles.
    public struct Settings: Sendable, Equatable {
        public var fullscreen: Bool
        public var viewOnly: Bool
        public var viewOnlyLocked: Bool
        public var scale: ScaleMode
        /// nil: all monitors.
        public var monitor: Int?
        public var monitorCount: Int
        public var clipboardSync: Bool
        public var keyboardGrab: Bool
        public var hud: Bool
        /// Where the statistics overlay sits when on.
        public var hudCorner: ViewerCorner = .topLeft
        /// Send pointer deltas with the pointer captured (see `ViewerConfiguration.relativePointer`).
        public var relativePointer = false
    }

    /// What choosing an item asks for.
    public enum Outcome: Sendable, Equatable {
        case changed(Settings)
        case command(ViewerCommand)
        case closeMenu
    }

    public var selected = 0
    public let items: [Item]

    /// The built-in items except `hidden`, with `actions` (labels) just before Disconnect.
    public init(actions: [String] = [], hidden: Set<Item> = []) {
        var items = Item.standard.filter { !hidden.contains($0) }
        let at = items.firstIndex(of: .disconnect) ?? items.count
        items.insert(contentsOf: actions.map { Item.action($0) }, at: at)
        self.items = items
    }

    public static func label(_ item: Item, _ s: Settings) -> String {
        func onOff(_ on: Bool) -> String { on ? "on" : "off" }
        switch item {
        case .fullscreen: return "Full screen: \(onOff(s.fullscreen))"
        case .viewOnly: return "View only: \(onOff(s.viewOnly))" + (s.viewOnlyLocked ? " (--view-only)" : "")
        case .scale: return "Scaling: \(s.scale.rawValue)"
        case .monitor: return "Monitor: " + (s.monitor.map { "\($0 + 1) of \(s.monitorCount)" } ?? "all (\(s.monitorCount))")
        case .clipboard: return "Clipboard sync: \(onOff(s.clipboardSync))"
        case .keyboardGrab: return "Grab keyboard: \(onOff(s.keyboardGrab))"
        case .relativePointer: return "Relative pointer: \(onOff(s.relativePointer))"
        case .hud: return "Statistics overlay: " + (s.hud ? s.hudCorner.rawValue.replacingOccurrences(of: "-", with: " ") : "off")
        case .sendCtrlAltDel: return "Send Ctrl+Alt+Del"
        case .sendMenuKey: return "Send F8"
        case .reconnect: return "Reconnect"
        case .disconnect: return "Disconnect and quit"
        case .close: return "Close menu (Esc)"
        case .action(let label): return label
        }
    }

    /// Choosing `item` with the window in `settings`.
    public static func choose(_ item: Item, _ settings: Settings) -> Outcome {
        var s = settings
        switch item {
        case .fullscreen: s.fullscreen.toggle()
        case .viewOnly:
            guard !s.viewOnlyLocked else { return .closeMenu }
            s.viewOnly.toggle()
        case .scale:
            let all = ScaleMode.allCases
            s.scale = all[(all.firstIndex(of: s.scale)! + 1) % all.count]
        case .monitor:
            // all → 1 → 2 → … → all
            if s.monitorCount <= 1 { s.monitor = nil } else if let m = s.monitor { s.monitor = m + 1 < s.monitorCount ? m + 1 : nil } else { s.monitor = 0 }
        case .clipboard: s.clipboardSync.toggle()
        case .keyboardGrab: s.keyboardGrab.toggle()
        case .relativePointer: s.relativePointer.toggle()
        case .hud:
            // off → top left → top right → bottom right → bottom left → off
            let corners = ViewerCorner.allCases
            if !s.hud {
                s.hud = true
                s.hudCorner = corners[0]
            } else if let i = corners.firstIndex(of: s.hudCorner), i + 1 < corners.count {
                s.hudCorner = corners[i + 1]
            } else {
                s.hud = false
            }
        case .sendCtrlAltDel: return .command(.pressKeys([0xFFE3, 0xFFE9, 0xFFFF]))
        case .sendMenuKey: return .command(.pressKeys([0xFFC5]))
        case .reconnect: return .command(.reconnect)
        case .disconnect: return .command(.disconnect)
        case .close: return .closeMenu
        case .action(let label): return .command(.action(label))
        }
        return .changed(s)
    }

    public mutating func move(by delta: Int) {
        selected = (selected + delta % items.count + items.count) % items.count
    }
}
