//! Tests of the chat-completions transcript reader and writer.
use super::*;
use phosphor_base::message::{FinishReason, MessageStatus, Usage};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use proptest::sample::Index;

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), arguments: arguments.into() }
}

fn text(text: &str) -> Part {
    Part::Text { text: text.into() }
}

fn image(url: &str, detail: Option<&str>) -> Part {
    Part::Image { url: url.into(), detail: detail.map(str::to_owned) }
}

fn array(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        other => panic!("fixture is not an array: {other}"),
    }
}

/// Checks both round trips for canonical input: JSON -> messages -> JSON, and messages -> JSON -> messages.
fn check_canonical(wire: Value, messages: Vec<Message>) {
    let wire = array(wire);
    assert_eq!(from_openai(&wire).unwrap(), messages);
    assert_eq!(to_openai(&messages), wire);
}

#[test]
fn coding_agent_transcript_round_trips() {
    let wire = json!([
        { "role": "system", "content": "You are a coding agent. Use the tools to read and change the repository." },
        { "role": "user", "name": "ana", "content": "`parses_empty_config` fails. Fix it." },
        {
            "role": "assistant",
            "content": null,
            "tool_calls": [
                { "id": "call_A1", "type": "function",
                  "function": { "name": "read_file", "arguments": "{\"path\":\"src/config.rs\"}" } },
                { "id": "call_B2", "type": "function",
                  "function": { "name": "run_tests", "arguments": "{\"filter\":\"parses_empty_config\"}" } },
            ],
        },
        { "role": "tool", "tool_call_id": "call_A1",
          "content": "pub fn parse(text: &str) -> Result<Config> {\n    Ok(serde_json::from_str(text)?)\n}\n" },
        { "role": "tool", "tool_call_id": "call_B2",
          "content": "test config::tests::parses_empty_config ... FAILED\nEOF while parsing a value at line 1 column 0" },
        { "role": "assistant", "content": "`parse` hands the empty file to serde_json; it now returns the default config." },
    ]);
    let mut user = Message::user("`parses_empty_config` fails. Fix it.").with_id("msg-1");
    user.name = Some("ana".into());
    let messages = vec![
        Message::system("You are a coding agent. Use the tools to read and change the repository.").with_id("msg-0"),
        user,
        Message::new(
            Role::Assistant,
            vec![
                Part::ToolCall(call("call_A1", "read_file", r#"{"path":"src/config.rs"}"#)),
                Part::ToolCall(call("call_B2", "run_tests", r#"{"filter":"parses_empty_config"}"#)),
            ],
        )
        .with_id("msg-2"),
        Message::tool_result(
            "call_A1",
            "read_file",
            "pub fn parse(text: &str) -> Result<Config> {\n    Ok(serde_json::from_str(text)?)\n}\n",
            false,
        )
        .with_id("msg-3"),
        Message::tool_result(
            "call_B2",
            "run_tests",
            "test config::tests::parses_empty_config ... FAILED\nEOF while parsing a value at line 1 column 0",
            false,
        )
        .with_id("msg-4"),
        Message::assistant("`parse` hands the empty file to serde_json; it now returns the default config.")
            .with_id("msg-5"),
    ];
    check_canonical(wire, messages);
}

#[test]
fn deepseek_reasoning_round_trips() {
    let wire = json!([
        { "role": "user", "content": "9.11 and 9.8, which is greater?" },
        { "role": "assistant", "reasoning_content": "Compare the tenths: 1 < 8, so 9.8 is greater.",
          "content": "9.8 is greater than 9.11." },
        { "role": "assistant", "reasoning_content": "I need the weather first.", "content": null,
          "tool_calls": [{ "id": "call_w", "type": "function",
                           "function": { "name": "weather", "arguments": "{\"city\":\"Hangzhou\"}" } }] },
    ]);
    let messages = vec![
        Message::user("9.11 and 9.8, which is greater?").with_id("msg-0"),
        Message::new(
            Role::Assistant,
            vec![
                Part::reasoning("Compare the tenths: 1 < 8, so 9.8 is greater."),
                text("9.8 is greater than 9.11."),
            ],
        )
        .with_id("msg-1"),
        Message::new(
            Role::Assistant,
            vec![
                Part::reasoning("I need the weather first."),
                Part::ToolCall(call("call_w", "weather", r#"{"city":"Hangzhou"}"#)),
            ],
        )
        .with_id("msg-2"),
    ];
    check_canonical(wire, messages);
}

#[test]
fn image_message_round_trips() {
    let wire = json!([
        { "role": "user", "content": [
            { "type": "text", "text": "What differs between these screenshots?" },
            { "type": "image_url", "image_url": { "url": "https://example.com/before.png", "detail": "high" } },
            { "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBORw0KGgo=" } },
            { "type": "text", "text": "Ignore the clock." },
        ] },
        { "role": "tool", "tool_call_id": "call_shot", "content": [
            { "type": "text", "text": "screenshot taken" },
            { "type": "image_url", "image_url": { "url": "data:image/png;base64,AAAA", "detail": "low" } },
        ] },
    ]);
    let messages = vec![
        Message::new(
            Role::User,
            vec![
                text("What differs between these screenshots?"),
                image("https://example.com/before.png", Some("high")),
                image("data:image/png;base64,iVBORw0KGgo=", None),
                text("Ignore the clock."),
            ],
        )
        .with_id("msg-0"),
        Message::new(
            Role::Tool,
            vec![
                Part::ToolResult(ToolResult {
                    call_id: "call_shot".into(),
                    name: String::new(),
                    content: "screenshot taken".into(),
                    is_error: false,
                }),
                image("data:image/png;base64,AAAA", Some("low")),
            ],
        )
        .with_id("msg-1"),
    ];
    check_canonical(wire, messages);
}

#[test]
fn empty_content_round_trips() {
    let wire = json!([
        { "role": "assistant", "content": null },
        { "role": "assistant", "content": "" },
        { "role": "tool", "tool_call_id": "", "content": "" },
    ]);
    let messages = vec![
        Message::new(Role::Assistant, vec![]).with_id("msg-0"),
        Message::assistant("").with_id("msg-1"),
        Message::tool_result("", "", "", false).with_id("msg-2"),
    ];
    check_canonical(wire, messages);
}

#[test]
fn several_tool_results_become_several_tool_messages() {
    let mut message = Message::new(
        Role::Tool,
        vec![
            Part::ToolResult(ToolResult {
                call_id: "a".into(),
                name: "ls".into(),
                content: "src".into(),
                is_error: false,
            }),
            Part::ToolResult(ToolResult {
                call_id: "b".into(),
                name: "cat".into(),
                content: "no such file".into(),
                is_error: true,
            }),
        ],
    );
    message.name = Some("runner".into());
    assert_eq!(
        message_to_openai(&message),
        array(json!([
            { "role": "tool", "tool_call_id": "a", "content": "src", "name": "runner" },
            { "role": "tool", "tool_call_id": "b", "content": "no such file", "name": "runner" },
        ]))
    );
}

#[test]
fn non_canonical_messages_convert_as_documented() {
    let assistant = Message::new(
        Role::Assistant,
        vec![
            text("Done"),
            Part::reasoning("one, "),
            text(" here."),
            Part::reasoning("two"),
            Part::ToolResult(ToolResult {
                call_id: "x".into(),
                name: "n".into(),
                content: "out".into(),
                is_error: false,
            }),
            Part::Finish { reason: FinishReason::Stop },
        ],
    );
    assert_eq!(
        message_to_openai(&assistant),
        array(json!([
            { "role": "assistant", "content": "Done here.", "reasoning_content": "one, two" },
            { "role": "tool", "tool_call_id": "x", "content": "out" },
        ]))
    );
    let tool = Message::new(
        Role::Tool,
        vec![
            text("before "),
            Part::ToolResult(ToolResult {
                call_id: "x".into(),
                name: "n".into(),
                content: "out".into(),
                is_error: false,
            }),
            image("u", None),
            Part::ToolResult(ToolResult {
                call_id: "y".into(),
                name: "n".into(),
                content: "".into(),
                is_error: false,
            }),
            text("after"),
        ],
    );
    assert_eq!(
        message_to_openai(&tool),
        array(json!([
            { "role": "tool", "tool_call_id": "x", "content": [
                { "type": "text", "text": "outbefore " },
                { "type": "image_url", "image_url": { "url": "u" } },
            ] },
            { "role": "tool", "tool_call_id": "y", "content": "after" },
        ]))
    );
    let empty_tool = Message::new(Role::Tool, vec![]);
    assert_eq!(
        message_to_openai(&empty_tool),
        array(json!([{ "role": "tool", "tool_call_id": "", "content": "" }]))
    );
}

#[test]
fn summary_flag_and_ids_are_written_only_when_asked() {
    let mut summary = Message::assistant("The user wants the config parser fixed.").with_id("01J-summary");
    summary.is_summary = true;
    summary.status = MessageStatus::Complete;
    summary.usage = Some(Usage { input_tokens: 10, output_tokens: 5, ..Usage::default() });
    let plain = json!({ "role": "assistant", "content": "The user wants the config parser fixed." });
    assert_eq!(to_openai(std::slice::from_ref(&summary)), vec![plain]);

    let options = ToOpenAiOptions { ids: true, summary_flag: true };
    let marked = to_openai_with(std::slice::from_ref(&summary), &options);
    assert_eq!(
        marked,
        vec![json!({
            "role": "assistant",
            "content": "The user wants the config parser fixed.",
            "id": "01J-summary",
            "is_summary": true,
        })]
    );
    let mut expected = summary.clone();
    expected.usage = None;
    assert_eq!(from_openai(&marked).unwrap(), vec![expected]);
}

#[test]
fn reads_aliases_legacy_forms_and_lenient_shapes() {
    let wire = array(json!([
        { "role": "developer", "content": [{ "type": "input_text", "text": "Be brief." }], "id": "dev-1" },
        { "role": "user", "content": [
            { "type": "input_text", "text": "Look: " },
            { "type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto" },
            { "type": "image_url", "image_url": "https://example.com/b.png" },
        ] },
        { "role": "assistant", "content": [
            { "type": "output_text", "text": "No. ", "annotations": [] },
            { "type": "refusal", "refusal": "I cannot help with that." },
        ], "refusal": " Sorry.", "reasoning": "policy", "reasoning_content": "policy" },
        { "role": "assistant", "content": null,
          "function_call": { "name": "ls", "arguments": "{\"dir\":\".\"}" } },
        { "role": "function", "name": "ls", "content": "src" },
        { "role": "assistant", "content": null, "tool_calls": [
            { "id": "c1", "function": { "name": "grep", "arguments": { "pattern": "fn main" } } },
        ] },
        { "role": "tool", "tool_call_id": "c1", "name": "grep-tool", "content": [
            { "type": "text", "text": "src/main.rs:1:" }, { "type": "text", "text": "fn main() {}" },
        ] },
        { "role": "tool", "tool_call_id": "unknown", "name": "search", "content": null },
        { "role": "tool", "tool_call_id": "unknown", "content": "orphan" },
    ]));
    let developer = Message::system("Be brief.").with_id("dev-1");
    let mut grep_result =
        Message::tool_result("c1", "grep", "src/main.rs:1:fn main() {}", false).with_id("msg-6");
    grep_result.name = Some("grep-tool".into());
    let mut search_result = Message::tool_result("unknown", "search", "", false).with_id("msg-7");
    search_result.name = Some("search".into());
    let expected = vec![
        developer,
        Message::new(
            Role::User,
            vec![
                text("Look: "),
                image("https://example.com/a.png", Some("auto")),
                image("https://example.com/b.png", None),
            ],
        )
        .with_id("msg-1"),
        Message::new(
            Role::Assistant,
            vec![Part::reasoning("policy"), text("No. "), text("I cannot help with that."), text(" Sorry.")],
        )
        .with_id("msg-2"),
        Message::new(Role::Assistant, vec![Part::ToolCall(call("function-call-3", "ls", r#"{"dir":"."}"#))])
            .with_id("msg-3"),
        Message::tool_result("function-call-3", "ls", "src", false).with_id("msg-4"),
        Message::new(Role::Assistant, vec![Part::ToolCall(call("c1", "grep", r#"{"pattern":"fn main"}"#))])
            .with_id("msg-5"),
        grep_result,
        search_result,
        Message::tool_result("unknown", "", "orphan", false).with_id("msg-8"),
    ];
    let (messages, warnings) = from_openai_with_warnings(&wire).unwrap();
    assert_eq!(messages, expected);
    assert_eq!(warnings, Vec::<String>::new());
}

#[test]
fn legacy_function_results_answer_calls_in_order_by_name() {
    let wire = array(json!([
        { "role": "assistant", "function_call": { "name": "ls" } },
        { "role": "assistant", "function_call": { "name": "cat", "arguments": "{}" } },
        { "role": "assistant", "function_call": { "name": "ls", "arguments": "{}" } },
        { "role": "function", "name": "cat", "content": "c" },
        { "role": "function", "name": "ls", "content": "l1" },
        { "role": "function", "name": "ls", "content": "l2" },
        { "role": "function", "name": "ls", "content": "l3" },
    ]));
    let ids: Vec<String> = from_openai(&wire)
        .unwrap()
        .iter()
        .flat_map(|m| m.tool_results().map(|r| r.call_id.clone()).collect::<Vec<_>>())
        .collect();
    assert_eq!(ids, vec!["function-call-1", "function-call-0", "function-call-2", ""]);
    let first = from_openai(&wire[..1]).unwrap();
    assert_eq!(first[0].tool_calls().cloned().collect::<Vec<_>>(), vec![call("function-call-0", "ls", "")]);
}

#[test]
fn ignored_fields_are_reported_once_per_name() {
    let wire = array(json!([
        { "role": "assistant", "content": "a", "audio": { "id": "audio_1" }, "annotations": [], "x": null },
        { "role": "assistant", "content": [{ "type": "text", "text": "b", "cache_control": { "type": "ephemeral" } }],
          "audio": { "id": "audio_2" } },
        { "role": "assistant", "audio": { "id": "audio_3" }, "tool_calls": [
            { "id": "c", "type": "function", "index": 0, "extra": 1, "function": { "name": "f", "arguments": "", "strict": true } },
        ] },
    ]));
    let (_, warnings) = from_openai_with_warnings(&wire).unwrap();
    assert_eq!(
        warnings,
        vec![
            r#"$[0].audio: ignored field "audio" (and 2 more like it); the message format has no place for it"#,
            r#"$[1].content[0].cache_control: ignored field "cache_control"; the message format has no place for it"#,
            r#"$[2].tool_calls[0].extra: ignored field "extra"; the message format has no place for it"#,
            r#"$[2].tool_calls[0].function.strict: ignored field "strict"; the message format has no place for it"#,
        ]
    );
}

#[test]
fn parses_every_transcript_layout() {
    let expected = vec![Message::user("hi").with_id("msg-0"), Message::assistant("hello").with_id("msg-1")];
    let array_text = r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]"#;
    let wrapped = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}"#;
    let jsonl =
        "\n{\"role\":\"user\",\"content\":\"hi\"}\r\n\n  \n{\"role\":\"assistant\",\"content\":\"hello\"}\n";
    let with_bom = format!("\u{feff}{array_text}");
    for text in [array_text, wrapped, jsonl, with_bom.as_str()] {
        assert_eq!(parse_transcript(text).unwrap(), expected, "{text:?}");
    }
    let one_line = r#"{"role":"user","content":"hi"}"#;
    assert_eq!(parse_transcript(one_line).unwrap(), expected[..1].to_vec());
    assert_eq!(parse_transcript(" \n ").unwrap(), Vec::<Message>::new());
    assert_eq!(parse_transcript("[]").unwrap(), Vec::<Message>::new());
}

fn check_error(input: &str, expected: &str) {
    match parse_transcript(input) {
        Ok(messages) => panic!("{input:?} parsed as {messages:?}"),
        Err(error) => assert_eq!(error.to_string(), expected, "{input:?}"),
    }
}

#[test]
fn every_error_names_the_place_what_was_found_and_what_is_allowed() {
    let roles = "expected one of system, developer, user, assistant, tool, function";
    let parts = "expected one of text, input_text, output_text, refusal, image_url, input_image";
    let transcript = "expected a JSON array of messages, an object with a \"messages\" array, or JSON lines with one message object each";
    let cases: Vec<(&str, String)> = vec![
        (r#"[1]"#, "$[0]: found a number; expected a message object".into()),
        (r#"[{"content":"hi"}]"#, format!("$[0].role: missing; {roles}")),
        (r#"[{"role":7}]"#, format!("$[0].role: found a number; {roles}")),
        (
            r#"[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"robot","content":"c"}]"#,
            format!(r#"$[2].role: unknown role "robot"; {roles}"#),
        ),
        (r#"[{"role":"user","id":5}]"#, "$[0].id: found a number; expected a string".into()),
        (r#"[{"role":"user","name":true}]"#, "$[0].name: found a boolean; expected a string".into()),
        (r#"[{"role":"assistant","is_summary":"yes"}]"#, "$[0].is_summary: found a string; expected true or false".into()),
        (
            r#"[{"role":"assistant","reasoning_content":"a","reasoning":"b"}]"#,
            "$[0].reasoning: text that differs from reasoning_content; expected only one of reasoning_content and reasoning, or the same text in both".into(),
        ),
        (r#"[{"role":"assistant","reasoning":{"effort":"high"}}]"#, "$[0].reasoning: found an object; expected a string".into()),
        (r#"[{"role":"assistant","reasoning_content":1}]"#, "$[0].reasoning_content: found a number; expected a string".into()),
        (r#"[{"role":"assistant","refusal":false}]"#, "$[0].refusal: found a boolean; expected a string".into()),
        (
            r#"[{"role":"user","content":42}]"#,
            "$[0].content: found a number; expected a string, null, or an array of content parts".into(),
        ),
        (r#"[{"role":"user","content":["hi"]}]"#, "$[0].content[0]: found a string; expected a content part object".into()),
        (r#"[{"role":"user","content":[{"text":"hi"}]}]"#, format!("$[0].content[0].type: missing; {parts}")),
        (r#"[{"role":"user","content":[{"type":3}]}]"#, format!("$[0].content[0].type: found a number; {parts}")),
        (
            r#"[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]"#,
            format!(r#"$[0].content[0].type: unsupported content part type "input_audio"; {parts}"#),
        ),
        (r#"[{"role":"user","content":[{"type":"text"}]}]"#, "$[0].content[0].text: missing; expected the text (a string)".into()),
        (
            r#"[{"role":"assistant","content":[{"type":"refusal","text":"no"}]}]"#,
            "$[0].content[0].refusal: missing; expected the refusal text (a string)".into(),
        ),
        (
            r#"[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"}]}]"#,
            "$[0].content[1].image_url: missing; expected an object with a url, or a URL string".into(),
        ),
        (
            r#"[{"role":"user","content":[{"type":"image_url","image_url":9}]}]"#,
            "$[0].content[0].image_url: found a number; expected an object with a url, or a URL string".into(),
        ),
        (
            r#"[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]"#,
            "$[0].content[0].image_url.url: missing; expected the image URL (a string)".into(),
        ),
        (
            r#"[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","detail":2}}]}]"#,
            "$[0].content[0].image_url.detail: found a number; expected a string".into(),
        ),
        (
            r#"[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]"#,
            "$[0].content[0].image_url: missing; expected the image URL (a string)".into(),
        ),
        (r#"[{"role":"assistant","tool_calls":{}}]"#, "$[0].tool_calls: found an object; expected an array of tool calls".into()),
        (
            r#"[{"role":"assistant","tool_calls":[1]}]"#,
            "$[0].tool_calls[0]: found a number; expected a tool call object with id, type and function".into(),
        ),
        (
            r#"[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f"}}]}]"#,
            "$[0].tool_calls[0].id: missing; expected the call's id (a string)".into(),
        ),
        (
            r#"[{"role":"assistant","tool_calls":[{"id":"c","type":"custom","custom":{"name":"f","input":""}}]}]"#,
            r#"$[0].tool_calls[0].type: unsupported tool call type "custom"; expected "function""#.into(),
        ),
        (
            r#"[{"role":"assistant","tool_calls":[{"id":"c","type":1,"function":{"name":"f"}}]}]"#,
            r#"$[0].tool_calls[0].type: found a number; expected "function""#.into(),
        ),
        (
            r#"[{"role":"assistant","tool_calls":[{"id":"c","type":"function"}]}]"#,
            "$[0].tool_calls[0].function: missing; expected an object with name and arguments".into(),
        ),
        (
            r#"[{"role":"assistant","tool_calls":[{"id":"c","function":"f"}]}]"#,
            "$[0].tool_calls[0].function: found a string; expected an object with name and arguments".into(),
        ),
        (
            r#"[{"role":"system","content":"s"},{"role":"user","content":"u"},{"role":"assistant","content":"a"},
                {"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}]"#,
            "$[3].tool_calls[0].function.name: missing; expected the function's name (a string)".into(),
        ),
        (
            r#"[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":5}}]}]"#,
            "$[0].tool_calls[0].function.arguments: found a number; expected the arguments as a string of JSON text".into(),
        ),
        (
            r#"[{"role":"assistant","function_call":"ls"}]"#,
            "$[0].function_call: found a string; expected an object with name and arguments".into(),
        ),
        (
            r#"[{"role":"assistant","function_call":{"arguments":"{}"}}]"#,
            "$[0].function_call.name: missing; expected the function's name (a string)".into(),
        ),
        (
            r#"[{"role":"user","content":"hi","tool_call_id":"c"}]"#,
            "$[0].tool_call_id: a tool_call_id on a user message; expected tool_call_id only on tool messages".into(),
        ),
        (
            r#"[{"role":"tool","content":"out"}]"#,
            "$[0].tool_call_id: missing; expected the id of the tool call this message answers".into(),
        ),
        (r#"[{"role":"tool","tool_call_id":4,"content":"out"}]"#, "$[0].tool_call_id: found a number; expected a string".into()),
        (
            r#"[{"role":"function","content":"out"}]"#,
            "$[0].name: missing; expected the name of the function whose result this is".into(),
        ),
        ("[{\"role\": \"user\",\n  \"content\": }]", "invalid JSON at line 2, column 14: expected value".into()),
        ("[{\"role\": \"user\"}", "invalid JSON at line 1, column 17: EOF while parsing a list".into()),
        (
            "{\"role\":\"user\",\"content\":\"a\"}\n\n{\"role\":\"user\",\"content\":\"b\"\n",
            "invalid JSON at line 4, column 0: EOF while parsing an object".into(),
        ),
        (
            "{\"role\":\"user\",\"content\":\"a\"}\n\n{\"role\":\"robot\",\"content\":\"b\"}\n",
            format!(r#"line 3: $.role: unknown role "robot"; {roles}"#),
        ),
        (
            "{\"role\":\"user\"}\n{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"function\":{}}]}",
            "line 2: $.tool_calls[0].function.name: missing; expected the function's name (a string)".into(),
        ),
        ("{\"role\":\"user\"}\n[1]", "line 2: $: found an array; expected a message object".into()),
        ("42", format!("$: found a number; {transcript}")),
        (r#"{"model":"gpt-4o"}"#, format!(r#"$: an object with neither "messages" nor "role"; {transcript}"#)),
        (r#"{"messages":{}}"#, "$.messages: found an object; expected an array of messages".into()),
        (
            r#"{"messages":[{"role":"user"},{"role":"x"}]}"#,
            format!(r#"$.messages[1].role: unknown role "x"; {roles}"#),
        ),
    ];
    for (input, expected) in cases {
        check_error(input, &expected);
    }
}

#[test]
fn errors_carry_structured_locations() {
    let error = parse_transcript("{\"role\":\"user\"}\n{\"role\":1}").unwrap_err();
    assert_eq!(
        error,
        TranscriptError::Invalid {
            location: Location { line: Some(2), path: "$.role".into() },
            found: "found a number".into(),
            expected: ROLES.into(),
        }
    );
}

// ---- Property tests ----

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-z \n\"\\\\{}]{1,12}", any::<String>()]
}

fn any_image() -> impl Strategy<Value = Part> {
    let detail =
        prop_oneof![Just("auto".to_owned()), Just("low".to_owned()), Just("high".to_owned()), any_text()];
    (any_text(), proptest::option::of(detail)).prop_map(|(url, detail)| Part::Image { url, detail })
}

fn any_call() -> impl Strategy<Value = ToolCall> {
    (any_text(), any_text(), any_text()).prop_map(|(id, name, arguments)| ToolCall { id, name, arguments })
}

fn any_text_part() -> impl Strategy<Value = Part> {
    any_text().prop_map(|text| Part::Text { text })
}

/// A system, user or assistant message in canonical form.
fn canonical_main() -> impl Strategy<Value = Message> {
    let content = prop_oneof![
        Just(Vec::new()),
        any_text_part().prop_map(|part| vec![part]),
        (
            proptest::collection::vec(prop_oneof![any_text_part(), any_image()], 0..4),
            any_image(),
            any::<Index>()
        )
            .prop_map(|(mut parts, image, at)| {
                parts.insert(at.index(parts.len() + 1), image);
                parts
            }),
    ];
    let role = prop_oneof![Just(Role::System), Just(Role::User), Just(Role::Assistant)];
    let calls = proptest::collection::vec(any_call(), 0..3);
    (role, proptest::option::of(any_text()), proptest::option::of(any_text()), content, calls).prop_map(
        |(role, name, reasoning, content, calls)| {
            let mut parts: Vec<Part> = reasoning.map(Part::reasoning).into_iter().collect();
            parts.extend(content);
            parts.extend(calls.into_iter().map(Part::ToolCall));
            let mut message = Message::new(role, parts);
            message.name = name;
            message
        },
    )
}

/// A tool message in canonical form, except for its result's name, which [`canonical_transcript`] sets; with
/// an index choosing an earlier call to answer, or `None` for an arbitrary call id.
fn canonical_tool() -> impl Strategy<Value = (Message, Option<Index>)> {
    (
        proptest::option::of(any_text()),
        any_text(),
        any_text(),
        proptest::collection::vec(any_image(), 0..3),
        proptest::option::of(any::<Index>()),
    )
        .prop_map(|(name, call_id, content, images, answers)| {
            let result = ToolResult { call_id, name: String::new(), content, is_error: false };
            let mut parts = vec![Part::ToolResult(result)];
            parts.extend(images);
            let mut message = Message::new(Role::Tool, parts);
            message.name = name;
            (message, answers)
        })
}

/// Canonical transcripts: ids `msg-{index}`, tool results answering earlier calls (or not) and named by the
/// documented rule.
fn canonical_transcript() -> impl Strategy<Value = Vec<Message>> {
    let message = prop_oneof![canonical_main().prop_map(|m| (m, None)), canonical_tool()];
    proptest::collection::vec(message, 0..8).prop_map(|items| {
        let mut calls: Vec<ToolCall> = Vec::new();
        let mut out = Vec::new();
        for (index, (mut message, answers)) in items.into_iter().enumerate() {
            message.id = format!("msg-{index}");
            let message_name = message.name.clone();
            for part in &mut message.parts {
                if let Part::ToolResult(result) = part {
                    if let (Some(answers), false) = (answers, calls.is_empty()) {
                        result.call_id = calls[answers.index(calls.len())].id.clone();
                    }
                    let by_call = calls.iter().rev().find(|call| call.id == result.call_id);
                    result.name =
                        by_call.map(|call| call.name.clone()).or(message_name.clone()).unwrap_or_default();
                }
            }
            calls.extend(message.tool_calls().cloned());
            out.push(message);
        }
        out
    })
}

/// Any message at all, canonical or not.
fn any_message() -> impl Strategy<Value = Message> {
    let finish = prop_oneof![
        Just(FinishReason::Stop),
        Just(FinishReason::ToolCalls),
        any_text().prop_map(FinishReason::Error)
    ];
    let result = (any_text(), any_text(), any_text(), any::<bool>())
        .prop_map(|(call_id, name, content, is_error)| ToolResult { call_id, name, content, is_error });
    let part = prop_oneof![
        any_text_part(),
        any_text().prop_map(Part::reasoning),
        any_image(),
        any_call().prop_map(Part::ToolCall),
        result.prop_map(Part::ToolResult),
        finish.prop_map(|reason| Part::Finish { reason }),
    ];
    let role = prop_oneof![Just(Role::System), Just(Role::User), Just(Role::Assistant), Just(Role::Tool)];
    let status = prop_oneof![
        Just(MessageStatus::Complete),
        Just(MessageStatus::Streaming),
        Just(MessageStatus::Failed)
    ];
    (
        role,
        proptest::collection::vec(part, 0..6),
        proptest::option::of(any_text()),
        any::<bool>(),
        status,
        any_text(),
    )
        .prop_map(|(role, parts, name, is_summary, status, id)| {
            let mut message = Message::new(role, parts).with_id(id);
            message.name = name;
            message.is_summary = is_summary;
            message.status = status;
            message.model = Some("m".into());
            message
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn canonical_messages_survive_the_round_trip(messages in canonical_transcript()) {
        let wire = to_openai(&messages);
        let (back, warnings) = from_openai_with_warnings(&wire).unwrap();
        prop_assert_eq!(&back, &messages);
        prop_assert!(warnings.is_empty());
        prop_assert_eq!(to_openai(&back), wire.clone());
        // The same messages as a JSON array, a wrapped object and JSON lines.
        let array_text = Value::Array(wire.clone()).to_string();
        prop_assert_eq!(&parse_transcript(&array_text).unwrap(), &messages);
        let wrapped = json!({ "messages": wire.clone() }).to_string();
        prop_assert_eq!(&parse_transcript(&wrapped).unwrap(), &messages);
        if !wire.is_empty() {
            let lines: Vec<String> = wire.iter().map(Value::to_string).collect();
            prop_assert_eq!(&parse_transcript(&lines.join("\n")).unwrap(), &messages);
        }
    }

    #[test]
    fn ids_and_summary_flags_survive_when_asked(
        messages in canonical_transcript(),
        ids in proptest::collection::vec("[a-z0-9-]{1,10}", 8),
        summaries in proptest::collection::vec(any::<bool>(), 8),
    ) {
        let mut messages = messages;
        for (index, message) in messages.iter_mut().enumerate() {
            message.id = ids[index].clone();
            message.is_summary = summaries[index];
        }
        let wire = to_openai_with(&messages, &ToOpenAiOptions { ids: true, summary_flag: true });
        prop_assert_eq!(from_openai(&wire).unwrap(), messages);
    }

    #[test]
    fn any_messages_convert_to_json_that_reads_back_canonical(messages in proptest::collection::vec(any_message(), 0..6)) {
        let wire = to_openai(&messages);
        let back = from_openai(&wire).unwrap();
        prop_assert_eq!(to_openai(&back), wire);
    }
}
