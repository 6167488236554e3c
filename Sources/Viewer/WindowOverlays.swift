#if canImport(CSDL2)
import CSDL2

/// Which overlay has the keyboard and pointer. At most one does; the HUD and the connection
/// status are drawn beside it and take no input.
enum WindowModal {
    /// Input goes to the remote side.
    case none
    case menu
    /// A question the protocol side asked (`ViewerWindow.ask`); keys type the answer.
    case question(WindowQuestion)
}

struct WindowQuestion {
    let prompt: String
    let secret: Bool
    let answer: CheckedContinuation<String?, Never>
    var typed = ""
}

/// What is drawn over the picture — the menu, a question, the HUD, the connection status —
/// and the keys that edit them. Draws with the renderer it is handed; lives on the window thread.
final class WindowOverlays {
    /// The font; nil when none was found (nothing is drawn, and no question can be asked).
    let text: TextOverlay?
    private(set) var modal = WindowModal.none
    var menu: ViewerMenu
    private var hudLines: [String] = []
    private(set) var nextHUDRefresh = 0.0

    init(fontPath: String?, menu: ViewerMenu) {
        text = TextOverlay(path: fontPath, size: 14)
        self.menu = menu
    }

    var menuOpen: Bool { if case .menu = modal { true } else { false } }
    var question: WindowQuestion? { if case .question(let q) = modal { q } else { nil } }
    /// No overlay has the keyboard and pointer.
    var isClear: Bool { if case .none = modal { true } else { false } }

    func openMenu() { modal = .menu }
    func closeMenu() { if menuOpen { modal = .none } }

    /// Puts a question up in place of whatever was open (a question already open is cancelled).
    func ask(_ question: WindowQuestion) {
        self.question?.answer.resume(returning: nil)
        modal = .question(question)
    }

    /// Ends the open question with `answer` (nil: cancelled); false when none was open.
    @discardableResult
    func answer(_ answer: String?) -> Bool {
        guard let q = question else { return false }
        modal = .none
        q.answer.resume(returning: answer)
        return true
    }

    /// Text typed into the open question.
    func type(_ typed: String) {
        guard var q = question else { return }
        q.typed += typed
        modal = .question(q)
    }

    /// A key for the open question: Return sends, Escape cancels, Backspace, Ctrl+V pastes the
    /// clipboard's first line, Ctrl+U clears. Other keys' text arrives as text events.
    func questionKey(_ keycode: Int32, mods: UInt32) {
        guard var q = question else { return }
        switch keycode {
        case 13, (1 << 30) | 88: // Return, keypad Enter
            WindowInput.dropText()
            answer(q.typed)
            return
        case 27: // Escape
            WindowInput.dropText()
            answer(nil)
            return
        case 8: // Backspace
            WindowInput.dropText()
            if !q.typed.isEmpty { q.typed.removeLast() }
        case 118 where mods & KMOD_CTRL.rawValue != 0, 117 where mods & KMOD_CTRL.rawValue != 0:
            WindowInput.dropText()
            if keycode == 117 {
                q.typed = ""
            } else if SDL_HasClipboardText() == SDL_TRUE, let raw = SDL_GetClipboardText() {
                q.typed += String(cString: raw).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
                SDL_free(raw)
            }
        default:
            return // the key's text arrives as a text event
        }
        modal = .question(q)
    }

    /// What a key does in the open menu.
    enum MenuKey { case close, choose, moved, ignored }

    func menuKey(_ keycode: Int32, menuKeycode: Int32) -> MenuKey {
        switch keycode {
        case 27, menuKeycode: modal = .none; return .close
        case (1 << 30) | 82: menu.move(by: -1); return .moved       // Up
        case (1 << 30) | 81: menu.move(by: 1); return .moved        // Down
        case 13, 32, (1 << 30) | 88: return .choose                 // Return, space, keypad Enter
        default: return .ignored
        }
    }

    /// The menu row under an output y coordinate.
    func menuItem(at y: Double, output: (width: Int, height: Int)) -> Int? {
        guard let text else { return nil }
        let layout = menuLayout(text, output: output)
        let row = Int((y - Double(layout.top)) / Double(text.lineHeight))
        return y >= Double(layout.top) && row >= 0 && row < menu.items.count ? row : nil
    }

    private func menuLayout(_ text: TextOverlay, output: (width: Int, height: Int)) -> (left: Int32, top: Int32, width: Int32, height: Int32) {
        let width: Int32 = 360, height = text.lineHeight * Int32(menu.items.count)
        return ((Int32(output.width) - width) / 2, max(8, (Int32(output.height) - height) / 2), width, height)
    }

    // MARK: - HUD

    func refreshHUD(_ now: Double, lines: [String]) {
        nextHUDRefresh = now + 0.5
        hudLines = lines
    }

    /// The HUD was just turned on: refreshed at the next turn of the loop.
    func refreshHUDSoon() { nextHUDRefresh = 0 }

    // MARK: - Drawing

    /// Draws the overlays over the picture: the status (unless a question is up), the HUD
    /// when on, the menu or the question.
    func draw(on renderer: OpaquePointer, output: (width: Int, height: Int), status: ViewerStatus, hud: Bool, settings: ViewerMenu.Settings) {
        guard let text else { return }
        if question == nil { drawStatus(status, renderer, output, text) }
        if hud, !hudLines.isEmpty {
            let corner = settings.hudCorner
            let width = hudLines.map { text.width(of: $0) }.max() ?? 0, height = text.lineHeight * Int32(hudLines.count)
            drawLines(hudLines, x: corner.isRight ? max(8, Int32(output.width) - width - 8) : 8,
                      y: corner.isBottom ? max(8, Int32(output.height) - height - 8) : 8, renderer, text)
        }
        switch modal {
        case .none: break
        case .menu: drawMenu(settings, renderer, output, text)
        case .question(let q): drawQuestion(q, renderer, output, text)
        }
    }

    private func drawLines(_ lines: [String], x: Int32, y: Int32, _ renderer: OpaquePointer, _ text: TextOverlay) {
        guard !lines.isEmpty else { return }
        let width = lines.map { text.width(of: $0) }.max() ?? 0
        var box = SDL_Rect(x: x - 4, y: y - 2, w: width + 8, h: text.lineHeight * Int32(lines.count) + 4)
        SDL_SetRenderDrawBlendMode(renderer, SDL_BLENDMODE_BLEND)
        SDL_SetRenderDrawColor(renderer, 0, 0, 0, 180)
        SDL_RenderFillRect(renderer, &box)
        for (i, line) in lines.enumerated() { text.draw(line, x: x, y: y + Int32(i) * text.lineHeight, renderer: renderer) }
    }

    private func drawStatus(_ status: ViewerStatus, _ renderer: OpaquePointer, _ output: (width: Int, height: Int), _ text: TextOverlay) {
        let line: String
        switch status {
        case .connected: return
        case .connecting(let what): line = "Connecting\(what.isEmpty ? "" : " to \(what)")…"
        case .reconnecting(let reason, let retryIn): line = "Connection lost (\(reason)) — reconnecting" + (retryIn > 0 ? " in \(retryIn) s" : "…")
        case .ended(let reason): line = "Disconnected: \(reason)"
        }
        let w = text.width(of: line)
        drawLines([line], x: max(8, (Int32(output.width) - w) / 2), y: max(8, Int32(output.height) / 2 - text.lineHeight), renderer, text)
    }

    private func drawMenu(_ settings: ViewerMenu.Settings, _ renderer: OpaquePointer, _ output: (width: Int, height: Int), _ text: TextOverlay) {
        let layout = menuLayout(text, output: output)
        var box = SDL_Rect(x: layout.left - 8, y: layout.top - 8, w: layout.width + 16, h: layout.height + 16)
        SDL_SetRenderDrawBlendMode(renderer, SDL_BLENDMODE_BLEND)
        SDL_SetRenderDrawColor(renderer, 20, 20, 24, 230)
        SDL_RenderFillRect(renderer, &box)
        for (i, item) in menu.items.enumerated() {
            let y = layout.top + Int32(i) * text.lineHeight
            if i == menu.selected {
                var row = SDL_Rect(x: layout.left - 4, y: y, w: layout.width + 8, h: text.lineHeight)
                SDL_SetRenderDrawColor(renderer, 60, 100, 170, 255)
                SDL_RenderFillRect(renderer, &row)
            }
            text.draw(ViewerMenu.label(item, settings), x: layout.left, y: y, renderer: renderer)
        }
    }

    private func drawQuestion(_ q: WindowQuestion, _ renderer: OpaquePointer, _ output: (width: Int, height: Int), _ text: TextOverlay) {
        let field = (q.secret ? String(repeating: "•", count: q.typed.count) : q.typed) + "▏"
        let lines = q.prompt.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            + ["", "> " + field, "", "Return: send   Esc: cancel   Ctrl+V: paste"]
        let width = lines.map { text.width(of: $0) }.max() ?? 0
        let x = max(8, (Int32(output.width) - width) / 2), y = max(8, (Int32(output.height) - text.lineHeight * Int32(lines.count)) / 2)
        var box = SDL_Rect(x: x - 16, y: y - 12, w: width + 32, h: text.lineHeight * Int32(lines.count) + 24)
        SDL_SetRenderDrawBlendMode(renderer, SDL_BLENDMODE_BLEND)
        SDL_SetRenderDrawColor(renderer, 20, 20, 24, 235)
        SDL_RenderFillRect(renderer, &box)
        for (i, line) in lines.enumerated() { text.draw(line, x: x, y: y + Int32(i) * text.lineHeight, renderer: renderer) }
    }
}
#endif
