/// Shell-like word splitting: white space separates, quotes group, nothing is expanded. The
/// options file's lines, `--output`'s specs and the hooks' command lines are all read this one
/// way, so a quote means the same in each.
enum ShellWords {
    /// The words of `text`, or nil when a quote is left open.
    static func split(_ text: String) -> [String]? {
        var words: [String] = []
        var current = ""
        var inWord = false
        var quote: Character?
        for character in text {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "\"" || character == "'" {
                quote = character
                inWord = true
            } else if character == " " || character == "\t" || character == "\r" {
                if inWord { words.append(current) }
                current = ""
                inWord = false
            } else {
                current.append(character)
                inWord = true
            }
        }
        guard quote == nil else { return nil }
        if inWord { words.append(current) }
        return words
    }
}
