You are summarizing the conversation that follows, between a user and a coding agent. Your summary will replace
the conversation: the agent will continue the work from your summary alone, so anything you leave out is lost.
Do not continue the conversation, answer the user or call tools. Write only the summary.

Session: "{{ session_title }}" ({{ session_id }}), {{ message_count }} messages with {{ model }}. Date: {{ date }}.
Context used: about {{ tokens_before }} of {{ context_window }} tokens.
{% if workspace %}
Workspace: `{{ workspace }}`
{% endif %}
{% if tools_used %}
Tools used: {{ tools_used | join(", ") }}
{% endif %}
{% if previous_summary %}

The earlier part of this session was already summarized:

<previous-summary>
{{ previous_summary }}
</previous-summary>

Merge the messages that follow into this summary: keep everything in it that is still true, update what changed,
and add what is new. Do not start over and do not drop details that still matter.
{% endif %}
{% if files %}

These files were read or changed. Name each one, with its exact path, under "Files and changes":
{% for file in files %}
- `{{ file }}`
{% endfor %}
{% endif %}

Use exactly these markdown headings, in this order. Under a heading with nothing to report, write "None."

## Goal
The user's goal and constraints in the user's own words: quote them ("...").

## Current state
What is done, what is in progress, and what works or fails right now.

## Files and changes
Each file read, created or changed: its exact path, what changed and why.

## Decisions
Each decision taken and its reason, and any option rejected.

## Errors and fixes
Each error met (the exact message), its cause, and how it was fixed or that it is still open.

## Next steps
The exact next actions, in order, with the commands, paths and names needed to take them.
{% if custom_instructions %}

Focus: the user asked this summary to pay particular attention to the following.
{{ custom_instructions }}
{% endif %}
