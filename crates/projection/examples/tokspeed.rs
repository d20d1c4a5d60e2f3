fn main() {
    let text = "[seq 12] result shell id=c12 status=ok exit_code=0:\nfile_12.txt 中文 \"quoted\" 😀\n".repeat(100);
    let t = std::time::Instant::now();
    let n = ctxlog_projection::tokens::text_tokens(ctxlog_projection::Tokenizer::O200k, &text);
    println!("first {} tokens {:?}", n, t.elapsed());
    let t = std::time::Instant::now();
    for _ in 0..10 { ctxlog_projection::tokens::text_tokens(ctxlog_projection::Tokenizer::O200k, &text); }
    println!("len {} per call {:?}", text.len(), t.elapsed() / 10);
}
