// The Public Chat page: asks the answers endpoint and shows the conversation.
// Text only ever goes in through textContent, never as markup.
"use strict";

(function () {
  const body = document.body;
  const agentId = body.dataset.agentId;
  const texts = JSON.parse(document.getElementById("texts").textContent);
  const endpoint = new URL("../api/public/chat/" + encodeURIComponent(agentId) + "/answers", document.baseURI);
  const form = document.getElementById("ask");
  const field = document.getElementById("question");
  const button = form.querySelector("button");
  const log = document.getElementById("log");
  const status = document.getElementById("status");
  let conversationId = null;

  function say(who, text, sources) {
    const item = document.createElement("li");
    item.className = who;
    const speaker = document.createElement("span");
    speaker.className = "visually-hidden";
    speaker.textContent = (who === "user" ? texts.you : texts.agent) + ": ";
    item.append(speaker, text);
    if (sources && sources.length) {
      const list = document.createElement("ul");
      list.className = "sources";
      list.setAttribute("aria-label", texts.sources);
      for (const source of sources) {
        const entry = document.createElement("li");
        if (/^https?:\/\//i.test(source.uri)) {
          const link = document.createElement("a");
          link.href = source.uri;
          link.rel = "noopener noreferrer";
          link.textContent = source.title;
          entry.append(link);
        } else {
          entry.textContent = source.title;
        }
        list.append(entry);
      }
      item.append(list);
    }
    log.append(item);
    item.scrollIntoView({ block: "end" });
  }

  async function ask(question) {
    const payload = { question: question };
    if (conversationId) payload.conversationId = conversationId;
    const response = await fetch(endpoint, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(payload),
    });
    const reply = await response.json().catch(() => null);
    if (response.ok && reply) return reply;
    if (response.status === 429) {
      const wait = response.headers.get("Retry-After") || "60";
      throw new Error(texts.slowDown.replace("{seconds}", wait));
    }
    throw new Error((reply && reply.error && reply.error.message) || texts.failed);
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const question = field.value.trim();
    if (!question) return;
    say("user", question);
    field.value = "";
    button.disabled = true;
    status.textContent = texts.thinking;
    try {
      const reply = await ask(question);
      conversationId = reply.conversationId;
      say("agent", reply.answer, reply.sources);
      status.textContent = "";
    } catch (error) {
      status.textContent = error.message;
    } finally {
      button.disabled = false;
      field.focus();
    }
  });

  field.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
})();
