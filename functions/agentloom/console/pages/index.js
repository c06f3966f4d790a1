// Every page module registers its routes on import; SPACE_NAV is the space's menu
// (admin: shown to space admins and owners only).
import "./spaces.js";
import "./sessions.js";
import "./run.js";
import "./operators.js";
import "./skills.js";
import "./mcp.js";
import "./knowledge.js";
import "./agents.js";
import "./connections.js";
import "./members.js";

export const SPACE_NAV = [
  { path: "sessions", title: "Sessions" },
  { path: "agents", title: "Agents" },
  { path: "connections", title: "Model connections", admin: true },
  { path: "skills", title: "Skills" },
  { path: "mcp", title: "MCP" },
  { path: "knowledge", title: "Knowledge" },
  { path: "members", title: "Members" },
  { path: "runs", title: "Runs", admin: true },
];
