"""glmcot.llm"""
