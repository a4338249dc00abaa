import type { Language } from "./types";

/** The interface's own words, in the Widget's language. `{n}` is a number. */
const en = {
  open: "Open chat",
  close: "Close chat",
  dismiss: "Dismiss",
  question: "Your question",
  send: "Send",
  you: "You",
  agent: "Assistant",
  sources: "Sources",
  thinking: "Looking for an answer…",
  conversation: "Conversation",
  suggested: "Suggested questions",
  branding: "Powered by svc",
  unavailable: "This chat is not available on this site.",
  slowDown: "Too many questions at once; try again in {n} s.",
  quota: "This assistant cannot take more questions right now.",
  modelDown: "The assistant is unavailable right now; try again shortly.",
  offline: "The connection was lost; check your network and try again.",
  failed: "Something went wrong; please try again.",
};

export type Words = typeof en;

const es: Words = {
  open: "Abrir el chat",
  close: "Cerrar el chat",
  dismiss: "Descartar",
  question: "Tu pregunta",
  send: "Enviar",
  you: "Tú",
  agent: "Asistente",
  sources: "Fuentes",
  thinking: "Buscando una respuesta…",
  conversation: "Conversación",
  suggested: "Preguntas sugeridas",
  branding: "Con la tecnología de svc",
  unavailable: "Este chat no está disponible en este sitio.",
  slowDown: "Demasiadas preguntas seguidas; vuelve a intentarlo en {n} s.",
  quota: "Este asistente no puede responder más preguntas por ahora.",
  modelDown: "El asistente no está disponible ahora; inténtalo de nuevo en un momento.",
  offline: "Se perdió la conexión; revisa tu red y vuelve a intentarlo.",
  failed: "Algo salió mal; vuelve a intentarlo.",
};

export const words = (language: Language): Words => (language === "es" ? es : en);
