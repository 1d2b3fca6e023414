import { builder } from "../../graphql/builder.ts";

void builder;
